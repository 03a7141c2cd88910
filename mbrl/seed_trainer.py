"""Seeds batched in one process (``batch_seeds=S``): S runs of one config, each a whole run in
a folder of its own (an ordinary run's folder, which ``resume=`` alone continues), stepped
together by :class:`~mbrl.batched_seeds.BatchedSeeds`, whose SAC updates run as one batched
block. What the batch shares (the first seed's start block, bar and time left; the process's
``time/*``): docs/scaling.md ("Seeds batched in one process").
"""

from __future__ import annotations

import copy
import os
import sys

from omegaconf import OmegaConf

from mbrl.batched_seeds import BatchedSeeds
from mbrl.config import Config, ConfigError
from mbrl.runtime import interrupt
from mbrl.runtime.checkpoint import load
from mbrl.runtime.interrupt import StopRequest
from mbrl.runtime.report import dropped_text, quit_text, resume_all_command
from mbrl.trainer import Trainer

UNCOMPARED = ("seed", "resume", "total_steps", "max_minutes", "batch_seeds", "batch_dirs")


def seed_folders(cfg: Config, run_dir: str) -> list[str]:
    """The S run folders: ``run_dir`` (the first seed's), then ``batch_dirs`` or, beside it,
    ``<run_dir>_seed<k>`` for seeds seed + 1, ..."""
    if cfg.batch_dirs:
        return [run_dir, *cfg.batch_dirs]
    base = run_dir.rstrip("/")
    return [run_dir, *(f"{base}_seed{cfg.seed + i}" for i in range(1, cfg.batch_seeds))]


def check_folders(cfg: Config, run_dir: str) -> list[str]:
    """Before anything is written: a new batch's other folders must not hold a run yet; a
    resumed batch's must each hold a checkpoint of the same config at the lead's step.
    Returns the folders (:func:`seed_folders`)."""
    folders = seed_folders(cfg, run_dir)
    if len(set(map(os.path.realpath, folders))) != len(folders):
        raise ConfigError(f"batch_seeds={cfg.batch_seeds}: two seeds share a folder: {folders}")
    if cfg.resume is None:
        for folder in folders[1:]:
            if os.path.isdir(folder) and os.listdir(folder):
                raise ConfigError(
                    f"batch_seeds={cfg.batch_seeds}: {folder} exists and is not empty; a new "
                    "batch writes each seed into a new folder (remove it, or resume the batch)"
                )
        return folders
    lead = {k: v for k, v in _saved(run_dir).items() if k not in UNCOMPARED}
    step = _step(run_dir, cfg)
    for folder in folders[1:]:
        if not os.path.isfile(os.path.join(folder, "ckpt", "last.pt")):
            raise ConfigError(
                f"resume={run_dir!r} with batch_seeds={cfg.batch_seeds}: {folder} has no "
                "checkpoint to continue (resume the seeds that have one alone)"
            )
        saved = {k: v for k, v in _saved(folder).items() if k not in UNCOMPARED}
        if saved != lead:
            raise ConfigError(f"{folder}'s config differs from {run_dir}'s in more than the seed")
        if (other := _step(folder, cfg)) != step:
            raise ConfigError(
                f"resume with batch_seeds={cfg.batch_seeds}: {folder} is at step {other:,} and "
                f"{run_dir} at {step:,}; batched seeds go on from one step (resume each alone)"
            )
    return folders


def _saved(folder: str) -> dict[str, object]:
    path = os.path.join(folder, "config.yaml")
    if not os.path.isfile(path):
        raise ConfigError(f"{path} not found; is {folder!r} a FlowMBPO run folder?")
    saved = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(saved, dict)
    return {str(k): v for k, v in saved.items()}


def _step(folder: str, cfg: Config) -> int:
    state = load(os.path.join(folder, "ckpt", "last.pt"), env_name=cfg.env.name, mmap=True)
    return int(state["step"])


def seed_configs(cfg: Config, folders: list[str]) -> list[Config]:
    """Each seed's own config, as its folder keeps it: a run of its own (batch keys off)."""
    out = []
    for i, folder in enumerate(folders):
        c = copy.deepcopy(cfg)
        c.batch_seeds, c.batch_dirs = 1, []
        if cfg.resume is None:
            c.seed = cfg.seed + i
        else:
            c.resume, c.seed = folder, int(str(_saved(folder)["seed"]))
        out.append(c)
    return out


class SeedTrainer:
    """The S runs of ``cfg`` (``batch_seeds``), the first in ``run_dir``."""

    def __init__(self, cfg: Config, run_dir: str) -> None:
        folders = seed_folders(cfg, run_dir)
        pairs = zip(seed_configs(cfg, folders), folders, strict=True)
        self.trainers = [Trainer(c, d) for c, d in pairs]
        self.batch_dirs = list(cfg.batch_dirs)  # (each seed's own config has none)
        for t in self.trainers:  # (one train.log, the lead's, for all: each names its seed)
            t.skips.who = t.zeroed.who = f"seed {t.cfg.seed} ({t.run_dir}): "
        lead = self.lead = self.trainers[0]
        # One process: its phases' times are all seeds', read once per log line by the first
        # seed (it logs first) and logged by the others as they are.
        self._times: dict[str, float] = {}
        lead.interval = self._read_times
        for t in self.trainers[1:]:
            t.timer, t.narrates, t.interval = lead.timer, False, lambda: dict(self._times)
        self.seeds = BatchedSeeds([t.algo for t in self.trainers])
        if lead.main:  # (what Ctrl-C says names the first seed's folder, not the last's)
            profile = lead.cfg.profile.enabled
            interrupt.describe(lambda at: quit_text(at, lead.run_dir, lead.ckpt, profile))

    def _read_times(self) -> dict[str, float]:
        self._times = self.lead.timer.metrics()
        return self._times

    @property
    def stopped(self) -> str:
        return self.lead.stopped

    def run(self) -> list[float]:
        """Train every seed to ``total_steps``; each seed's last evaluation's mean return.
        Ctrl-C or ``max_minutes`` stops all after the current step, each with its checkpoint."""
        lead, total = self.lead, self.lead.cfg.total_steps
        stop = StopRequest(lambda: lead.progress.waiting_for(), lead.cfg.max_minutes)
        self._warm_up()
        others = "".join(  # (the lead's start block says its own dropped lines)
            f"\n               seed {t.cfg.seed}: {t.run_dir}{dropped_text(t)}"
            for t in self.trainers[1:]
        )
        note = (
            f"\n  batched      {len(self.trainers)} seeds in this process (batch_seeds; memory "
            f"and checkpoints above are each seed's):{others}"
        )
        for i, t in enumerate(self.trainers):
            t.begin(shown=i == 0, note=note)
        try:
            with stop:
                while self.seeds.env_steps < total:
                    steps = self.seeds.step(lead.timer, lead.progress.phase)
                    for t, step in zip(self.trainers, steps, strict=True):
                        t.observe(step)
                    if stop.agreed():
                        for t in self.trainers:
                            t.stop(stop.why)
                        break
        finally:
            for t in self.trainers:
                t.end()
        returns = [lead.finish()]
        again = resume_all_command(lead.run_dir, len(self.trainers), self.batch_dirs)
        lead.progress.write(f"  resume all   {again}")  # (the lead's summary: its limit line)
        for t in self.trainers[1:]:
            returns.append(t.last_eval.get("eval/return_mean", float("nan")))
            best = f", best {t.best_return:.1f} (step {t.best_step})" if t.last_eval else ""
            skipped = f"; skipped {line}" if (line := t.skips.line()) else ""
            skipped += f"; {line}" if (line := t.zeroed.line()) else ""
            lead.progress.write(
                f"  seed {t.cfg.seed}: eval return last {returns[-1]:.1f}{best}{skipped}; "
                f"{t.run_dir}"
            )
        return returns

    def _warm_up(self) -> None:
        """Compile the batched update and the fits now (timed as the phase ``compile``)."""
        if self.lead.speed.compile:
            print("compiling the batched SAC update and model fit...", file=sys.stderr)
            with self.lead.timer.phase("compile"):
                compiled = self.seeds.warm_up()
            for t in self.trainers:
                t.compiled = compiled
