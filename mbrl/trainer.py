"""A run: the algorithm (``mbrl.mbpo.MBPO``) stepped to its step count, and around it what a
run needs: logs, evaluations, checkpoints, resume, the time left and the texts it prints."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor

from mbrl import collectives, run_state
from mbrl.compiled import Compiled
from mbrl.config import Config, changed_settings
from mbrl.envs.vector import make_vector_env, resolve_vector, vector_dims
from mbrl.evaluator import EVAL_SEED, Evaluator
from mbrl.mbpo import MBPO, Step
from mbrl.runtime import checkpoint, distributed, interrupt, report, runlock
from mbrl.runtime.capacity import check_memory, checkpoint_sizes
from mbrl.runtime.eta import RunClock
from mbrl.runtime.interrupt import StopRequest
from mbrl.runtime.logger import Logger, SilentLogger, WandbSink, set_aside_logs, to_numbers
from mbrl.runtime.progress import Progress, episodes
from mbrl.runtime.speed import resolve_speed
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import (
    configure_cpu,
    device_text,
    resolve_device,
    rss_mb,
    write_atomic,
)
from mbrl.runtime.validate import to_yaml
from mbrl.schedule import crossed
from mbrl.seeding import seed_everything


class Trainer:
    """A run of the algorithm (:class:`~mbrl.mbpo.MBPO`, ``self.algo``): ``run()`` steps it to
    ``cfg.total_steps`` env steps and, around it, logs, evaluates, checkpoints and reports."""

    def __init__(self, cfg: Config, run_dir: str) -> None:
        # Under torchrun each rank runs a Trainer on its share (distributed.rank_config);
        # ``config`` is the whole run's, as saved in config.yaml.
        self.config, self.run_dir = cfg, run_dir
        self.world, self.rank = distributed.world_size(), distributed.rank()
        self.main = self.rank == 0  # evaluates, logs, writes checkpoints
        self.cfg = cfg = distributed.rank_config(cfg, self.world)
        configure_cpu(cfg.threads, cfg.flush_denormal)
        seed_everything(cfg.seed)  # the same initial weights on every rank
        self.device = distributed.start(resolve_device(cfg.device))
        self.device_name = device_text(self.device)
        n = cfg.env.num_envs
        mode, version = resolve_vector(cfg.env.vector, n), cfg.env.version
        envs = make_vector_env(cfg.env.name, n, mode, cfg.env.max_episode_steps, version=version)
        obs_dim, act_dim = vector_dims(envs)
        check_memory(cfg, obs_dim, act_dim, self.device)  # before anything large is allocated
        self.ckpt_sizes = checkpoint_sizes(self.config, obs_dim, act_dim)
        # compile=auto on a resume: the run's own choice (compiled and eager round apart)
        kept = checkpoint.compiled_before(cfg.resume, self.device) if cfg.resume else None
        self.speed = resolve_speed(cfg, self.device, self.world, kept)
        self.algo = MBPO(cfg, envs, self.device, self.speed, rank=self.rank, world=self.world)
        self.evaluator = _evaluator(cfg, self.algo.acting.device) if self.main else None
        self.compiled: dict[str, Compiled] = {}  # what was compiled: warm-up time, failure
        self.best_return, self.best_step = -float("inf"), 0
        self.last_eval: dict[str, float] = {}
        self._learner_metrics: dict[str, Tensor] = {}
        self.skips = report.SkippedUpdates()  # SAC updates skipped (non-finite loss)
        self.zeroed = report.ZeroedActions()  # env steps that acted with zeros (NaN action)
        self.timer = PhaseTimer(self.device)
        self.step_hook: Callable[[], None] | None = None  # called after every env step
        self.narrates = True  # prints the time left (a batch's other seeds do not)
        self.line_label = ""  # a parallel sweep's job: no bar, a line per evaluation
        # The phases' seconds since the last log line (a batch's other seeds: the first's)
        self.interval: Callable[[], dict[str, float]] = self.timer.metrics
        self.stopped = ""  # what ended run() early: "Ctrl-C", "max_minutes=... reached"
        self.progress = Progress(cfg.total_steps, 0, False, 0)  # run() makes the real one
        self.clock = RunClock(cfg)  # work and rates, for the estimate of the time left
        resumed = run_state.load(self, cfg.resume) if cfg.resume else None
        if resumed is None:
            collectives.broadcast_(run_state.shared_tensors(self.algo))  # rank 0's everywhere
        self.resumed_at = None if resumed is None else self.env_steps
        # (what this resume changed: the steps before it ran with the checkpoint's values;
        # a profiling window never resumes, launch.resolve refuses it)
        self.changed: list[str] = []
        if resumed is not None:
            self.changed = changed_settings(resumed["config"], asdict(self.config))
        if resumed is not None:  # (the agent's count of skipped updates is in its state)
            skipped = getattr(self.algo.agent, "nonfinite_steps", 0)
            self.skips.resumed(self.env_steps, int(skipped), self.algo.updates)
            zeroed = collectives.sum_int(self.algo.collector.nonfinite_actions)  # (all ranks')
            self.zeroed.resumed(self.env_steps, zeroed)
        self.logger: Logger | SilentLogger = SilentLogger()
        if self.main:  # files only now: a resume from a bad checkpoint leaves them untouched
            self._start_files(run_dir)
        if resumed is not None:
            self.logger.load_state_dict(resumed["logger"], self.env_steps)

    def _start_files(self, run_dir: str) -> None:
        runlock.acquire(run_dir)  # one process per run folder
        if self.resumed_at is None and (moved := set_aside_logs(run_dir)):
            print(moved, file=sys.stderr)  # (a run that saved no checkpoint: kept, not mixed)
        # (atomic: seeds.py reads a running run's config for its time-left line)
        write_atomic(os.path.join(run_dir, "config.yaml"), to_yaml(self.config))
        lc = self.cfg.logger
        sink = WandbSink(run_dir, lc, asdict(self.cfg)) if lc.wandb else None
        self.logger = Logger(run_dir, lc.tensorboard, wandb=sink)
        c = self.cfg.checkpoint
        self.ckpt = checkpoint.CheckpointManager(run_dir, c.snapshots, c.buffer_in_snapshots)
        self.ckpt.saved_step = self.resumed_at
        profile = self.cfg.profile.enabled  # (what an immediate quit, Ctrl-C, says from now on)
        interrupt.describe(lambda moment: report.quit_text(moment, run_dir, self.ckpt, profile))

    @property
    def env_steps(self) -> int:
        return self.algo.env_steps

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> float:
        """Train to ``total_steps``; returns the last evaluation's mean return. Ctrl-C or the end
        of ``max_minutes`` stops after the current step (or fit epoch), with ``ckpt/last.pt``."""
        stop = StopRequest(lambda: self.progress.waiting_for(), self.cfg.max_minutes)
        self.warm_up()
        self.begin()
        try:
            with stop:
                if self._loop(stop.agreed):
                    self.stop(stop.why)
        finally:
            self.end()
        return self.finish()

    def begin(self, shown: bool = True, note: str = "") -> None:
        """The start block (on rank 0; ``note``: lines after it) and the progress bar
        (``shown``: the block and the bar at all)."""
        cfg = self.cfg
        if self.main and shown:
            print(report.start_text(self) + note, file=sys.stderr, flush=True)
        label = self.line_label if shown and cfg.logger.progress and self.main else ""
        shown = shown and cfg.logger.progress and self.main
        steps = (cfg.total_steps, self.env_steps)
        self.progress = Progress(*steps, shown, cfg.algorithm.init_steps, label)
        if self.last_eval:  # (a resume: the checkpoint's last evaluation, until the next)
            self.progress.eval_return(self.last_eval["eval/return_mean"])

    def stop(self, why: str) -> None:
        """Stopped early (``why``: Ctrl-C, the time limit): ``ckpt/last.pt`` at this step. No
        extra metric lines: the resumed run then logs exactly what the uninterrupted one would
        have."""
        self.stopped = why
        state = run_state.state_dict(self)
        if state is not None:
            self.ckpt.save_last(state)
        self._recount()

    def _recount(self) -> None:
        """The summary's counts of skipped SAC updates and zeroed actions as of this step, not
        the last log line's (a stop falls between them), warned of as at a log line. Every rank
        calls it (the zeroed steps are summed over ranks)."""
        zeroed = collectives.sum_int(self.algo.collector.nonfinite_actions)
        counts: dict[str, Any] = {
            "learner/updates": self.algo.updates,
            "collector/nonfinite_actions": zeroed,
        }
        if "nonfinite_steps" in self._learner_metrics:  # (none before SAC's first update)
            counts["learner/nonfinite_steps"] = self._learner_metrics["nonfinite_steps"]
        self._watch(to_numbers(counts))

    def _watch(self, values: dict[str, float | int]) -> None:
        """Skipped SAC updates and zeroed actions counted to here, warned of (on rank 0) when
        they first appear."""
        for watch in (self.skips, self.zeroed):
            if (warning := watch.seen(self.env_steps, values)) and self.main:
                logging.getLogger(__name__).warning(warning)

    def end(self) -> None:
        """Close what the run holds open (files, env workers, the folder's lock)."""
        self.progress.close()
        self.logger.close()
        if self.evaluator is not None:
            self.evaluator.close()
        self.algo.close()
        if self.main:
            runlock.release(self.run_dir)

    def finish(self) -> float:
        """The closing summary (on rank 0); the last evaluation's mean return."""
        if self.main:
            self.progress.write(report.summary_text(self, self.stopped or "finished"))
        return self.last_eval.get("eval/return_mean", float("nan"))

    def _loop(self, stop: Callable[[], bool]) -> bool:
        """MBPO's Algorithm 2 to ``total_steps`` env steps, each step observed; True when
        ``stop()`` (a Ctrl-C or the time limit, agreed by every rank) ended it early."""
        algo, total = self.algo, self.cfg.total_steps
        while algo.env_steps < total:
            step = algo.step(self.timer, stop, self.progress.phase)
            if step.paused:  # stopped during a model fit: paused after an epoch, resumable
                return True
            self.observe(step)
            if stop():
                return True
        return False

    def warm_up(self) -> None:
        """Compile the SAC update and the model-fit step now (on copies: the run's state is
        untouched), timed for the start block and as the phase ``compile``; a compile failure
        falls back to eager. Once."""
        if not self.speed.compile or self.compiled:
            return
        if self.main:
            fits = self.cfg.algorithm.name == "mbpo"
            what = "the SAC update" + (" and the model fit" if fits else "")
            print(f"compiling {what} (torch.compile)...", file=sys.stderr, flush=True)
        with self.timer.phase("compile"):
            self.compiled = self.algo.warm_up()

    # --- what the run does around each step ---------------------------------------------------

    def observe(self, step: Step) -> None:
        """Log a model phase's metrics; count the step's work; then log, evaluate and
        checkpoint when due (the last step always)."""
        done = self.clock.work.done
        if step.model is not None and step.model_step is not None:
            self.clock.work.model_phase(step.model, self.cfg.rewarder.mode != "none")
            with self.timer.phase("log"):
                self.logger.log(step.model_step, step.model)
        done["env"] += step.env_steps
        if step.sac is not None:
            self._learner_metrics = step.sac
            done["sac"] += step.updates
        self.progress.step(self.env_steps)
        if self.main and self.narrates:  # the bar's ETA from per-phase rates, once by phase
            self.clock.tick(self.progress, self.timer, self.env_steps)
        self._periodic()
        if self.step_hook is not None:
            self.step_hook()

    def _periodic(self) -> None:
        step, cfg, n = self.env_steps, self.cfg, self.algo.collector.step_size
        last = step >= cfg.total_steps
        if crossed(step, cfg.logger.every, n) or last:  # the last step always
            with self.timer.phase("log"):
                self._log()
        if crossed(step, cfg.eval.every, n) or last:
            is_best = self._evaluate(step) if self.evaluator is not None else False
            with self.timer.phase("checkpoint"):
                self.progress.phase("checkpoint")
                state = run_state.state_dict(self)  # every rank sends its own part to rank 0
                if state is not None:  # rank 0
                    self.ckpt.save(state, step, is_best)
            self.clock.work.done["checkpoint"] += 1
            self.progress.phase("")
            if self.last_eval:
                self.progress.eval_return(self.last_eval["eval/return_mean"])

    def _evaluate(self, step: int) -> bool:
        """Evaluate the current weights and log the result; True for the best so far."""
        assert self.evaluator is not None
        with self.timer.phase("eval"):
            self.progress.phase(f"eval: {episodes(self.cfg.eval.episodes)}")
            self.algo.acting.sync()  # evaluate the current weights
            self.last_eval = self.evaluator.run(self.algo.act)
        self.clock.work.done["eval"] += self.cfg.eval.episodes
        with self.timer.phase("log"):
            self.logger.log(step, self.last_eval)
        is_best = self.last_eval["eval/return_mean"] > self.best_return
        if is_best:
            self.best_return, self.best_step = self.last_eval["eval/return_mean"], step
        return is_best

    def _log(self) -> None:
        metrics: dict[str, Any] = {f"learner/{k}": v for k, v in self._learner_metrics.items()}
        metrics.update(self.algo.metrics())  # learner/updates, buffer/*, collector/*
        metrics.update(self.interval())
        metrics["process/rss_mb"] = rss_mb()
        if self.device.type == "cuda":  # (what several runs on one GPU each hold at most)
            metrics["process/gpu_peak_mb"] = torch.cuda.max_memory_reserved(self.device) / 2**20
        metrics.update(self.algo.ran())  # what ran: compiled or eager, graphed or not, why
        metrics["speed/device"] = self.device_name  # (a figure names the machine)
        self._watch(self.logger.log(self.env_steps, metrics))


def _evaluator(cfg: Config, device: torch.device) -> Evaluator:
    """Deterministic episodes from seeds seed + EVAL_SEED + i, the same at every evaluation."""
    return Evaluator(
        cfg.env.name,
        episodes=cfg.eval.episodes,
        seed=cfg.seed + EVAL_SEED,
        device=device,
        max_episode_steps=cfg.env.max_episode_steps,
        vector=cfg.eval.vector,
        version=cfg.env.version,
    )
