"""The text a run prints when it starts and when it ends (or is stopped)."""

from __future__ import annotations

import errno
import os
import shlex
import sys
from typing import Protocol

import torch

from mbrl.agents.agent_registry import agent_name
from mbrl.compiled import Compiled, Speed
from mbrl.config import Config
from mbrl.envs import env_spec
from mbrl.envs.vector import resolve_vector
from mbrl.mbpo import MBPO
from mbrl.runtime import distributed
from mbrl.runtime.capacity import CheckpointSizes, buffer_bytes
from mbrl.runtime.checkpoint import CheckpointManager
from mbrl.runtime.inert_settings import warnings_for
from mbrl.runtime.interrupt import STARTING
from mbrl.runtime.logger import Logger, SilentLogger
from mbrl.runtime.progress import duration, episodes, megabytes, start_block
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import hydra_value


class Run(Protocol):
    """What the texts read from a run (``mbrl.trainer.Trainer``; the layers above runtime/
    are not imported here)."""

    cfg: Config
    world: int  # processes of the run (torchrun)
    run_dir: str
    device: torch.device
    speed: Speed  # amp, compile, graphs, TF32 as decided
    compiled: dict[str, Compiled]  # what was compiled: warm-up time, failure
    algo: MBPO
    ckpt_sizes: CheckpointSizes
    skips: SkippedUpdates  # SAC's updates skipped for a non-finite loss
    zeroed: ZeroedActions  # env steps whose non-finite action was replaced by zeros
    logger: Logger | SilentLogger
    resumed_at: int | None
    changed: list[str]  # settings this resume changed (``key old -> new``)
    timer: PhaseTimer
    last_eval: dict[str, float]
    best_return: float
    best_step: int

    @property
    def env_steps(self) -> int: ...


PHASE_ORDER = ("compile", "env", "model", "rewarder", "rollout", "sac", "eval", "log", "checkpoint")
LEARNING_PHASES = ("model", "rewarder", "rollout", "sac")  # none runs in the random steps
RAN_NAMES = {"speed/sac_update": "SAC update", "speed/model_fit": "model fit"}


def _what(t: Run) -> str:
    cfg = t.cfg
    agent = f"agent {agent_name(cfg.agent._target_)}"
    if cfg.algorithm.name == "sac":
        return f"model-free SAC, {agent}"
    m = cfg.model
    return f"MBPO + {m.name} model ({m.members} members, {m.elites} elites), {agent}"


def loop_line(cfg: Config) -> str:
    """The algorithm's own settings in one line: MBPO's model phases, rollout schedule and
    batch mix (every one a config key of docs/usage.md), or SAC's update ratio."""
    g = cfg.algorithm.updates_per_step
    sac = f"{g} SAC update{'s' if g != 1 else ''} per env step"
    if cfg.algorithm.name == "sac":
        return f"{sac}, on real data"
    r, m = cfg.rollout, cfg.mbpo
    lengths = f"length {r.min_length}"
    if r.max_length != r.min_length:
        lengths += f" -> {r.max_length} over epochs {r.min_epoch}-{r.max_epoch}"
    line = f"a model fit and {r.batch_size:,} rollouts ({lengths}) every {m.model_train_freq} steps"
    if cfg.rewarder.mode != "none":
        line += f", rewarder {cfg.rewarder.mode}"
    return f"{line}; {sac}, {m.real_ratio:.0%} of each batch real".replace("%", " %")


def compile_line(t: Run) -> str:
    """Whether the run compiles, why, and how long compiling took (or why it failed)."""
    line = t.speed.why
    done = []
    for name, c in t.compiled.items():
        done.append(f"{name} {c.ran}" if c.failure else f"{name} {c.seconds or 0.0:.1f} s")
    return f"{line}; warm-up {', '.join(done)}" if done else line


def start_text(t: Run) -> str:
    cfg = t.cfg
    obs_dim, act_dim = t.algo.dims
    real, pool = buffer_bytes(cfg, obs_dim, act_dim)
    memory = f"real buffer {megabytes(real)}" + (f", model pool {megabytes(pool)}" if pool else "")
    sac_amp, model_amp = t.speed.sac_amp, t.speed.model_amp
    amp = sac_amp if sac_amp == model_amp else f"SAC {sac_amp}, model {model_amp}"
    threads = threads_text(cfg.threads, os.cpu_count() or 1, t.device.type)
    lines = {
        "run folder": f"{t.run_dir} (process {os.getpid()})",
        "device": f"{t.device} (amp {amp}, {threads})",
        "compile": compile_line(t),
        "steps": f"{t.env_steps} -> {cfg.total_steps} (random until {cfg.algorithm.init_steps}; "
        f"eval every {cfg.eval.every} steps, {episodes(cfg.eval.episodes)})",
        "loop": loop_line(cfg),
        "memory": memory,
        "checkpoints": t.ckpt_sizes.text(),
    }
    if t.world > 1:
        lines["processes"] = f"{t.world} (torchrun); each rank takes 1/{t.world} of every batch"
    if cfg.env.num_envs > 1:
        mode = resolve_vector(cfg.env.vector, cfg.env.num_envs)
        lines["envs"] = f"{cfg.env.num_envs} copies ({mode}), {cfg.env.num_envs} x "
        lines["envs"] += f"{cfg.algorithm.updates_per_step} SAC updates per vector step"
    if t.resumed_at is not None:
        lines["resumed"] = f"from step {t.resumed_at} (ckpt/last.pt)" + dropped_text(t)
        if t.changed:  # (config.yaml records only the new values)
            lines["changed"] = f"{'; '.join(t.changed)} (steps to {t.resumed_at:,} ran with "
            lines["changed"] += "the values before; config.yaml now holds the new ones)"
    if cfg.logger.tensorboard:
        lines["watch"] = f"tensorboard --logdir {os.path.join(t.run_dir, 'log', 'tb')}"
    gym_id = env_spec(cfg.env.name).version(cfg.env.version).gym_id
    title = f"FlowMBPO: {_what(t)} on {cfg.env.name} ({gym_id}, obs {obs_dim}, act {act_dim})"
    warnings = "".join(f"\n{line}" for line in warnings_for(cfg))  # settings that cannot act
    return f"{title}, seed {cfg.seed}\n{start_block(lines)}{warnings}"


def threads_text(threads: int, cores: int, device: str = "cpu") -> str:
    """How many torch threads the run uses, and why (docs/benchmarks.md, "Threads")."""
    if threads == 0:
        return f"torch's default threads ({torch.get_num_threads()} of {cores} cores)"
    text = f"{threads} torch thread{'s' if threads != 1 else ''}"
    if threads == 1 and cores > 1 and device == "cpu":
        text += f" of {cores} cores: safe beside other runs; alone, threads={cores} is faster"
    return text


def dropped_text(t: Run) -> str:
    """What a resume took out of ``metrics.jsonl``: the lines logged after the checkpoint
    (the run logs those steps again, as the uninterrupted run would have)."""
    lines, last = t.logger.dropped
    if not lines:
        return ""
    upto = f" (to step {last})" if last else ""
    said = f"{lines} metric line{'' if lines == 1 else 's'}"
    return f"; {said} logged after it{upto} dropped: this run logs those steps again"


def resume_command(run_dir: str, world: int | None = None) -> str:
    """The command that continues this run, as the user would type it from here: under
    torchrun with as many processes as it ran on (``world``; None: this process's group)."""
    script = "scripts/train.py"
    if sys.argv and sys.argv[0].endswith("train.py"):
        path = os.path.abspath(sys.argv[0])
        script = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    world = distributed.world_size() if world is None else world
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world)) or world  # (per node: torchrun's)
    launcher = (
        "python" if world == 1 else f"torchrun {_nodes(world, local)}--nproc_per_node={local}"
    )
    return f"{launcher} {shlex.quote(script)} {shlex.quote('resume=' + hydra_value(run_dir))}"


def _nodes(world: int, local: int) -> str:
    """torchrun's options for a run on several nodes (none on one): the node count and a c10d
    rendezvous at the host and port this run's ranks met at (``MASTER_ADDR``/``MASTER_PORT``,
    as torchrun set them), so that the same command, run on each node, starts them again."""
    if world == local:
        return ""
    host, port = os.environ.get("MASTER_ADDR", "<host>"), os.environ.get("MASTER_PORT", "<port>")
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    rdzv = f"--rdzv-backend=c10d --rdzv-endpoint={host}:{port} "
    rdzv += f"--rdzv-id={shlex.quote(run_id)} " if run_id and run_id != "none" else ""
    return f"--nnodes={world // local} {rdzv}"


def resume_all_command(run_dir: str, seeds: int, batch_dirs: list[str]) -> str:
    """The command that continues a batch of ``seeds`` runs (``batch_seeds``) led by
    ``run_dir``, its other folders ``batch_dirs`` (none: ``<run_dir>_seed<k>``)."""
    listed = ",".join(hydra_value(d) for d in batch_dirs)
    dirs = f" {shlex.quote(f'batch_dirs=[{listed}]')}" if batch_dirs else ""
    return f"{resume_command(run_dir)} batch_seeds={seeds}{dirs}"


def disk_full_text(err: OSError, run_dir: str, resume: str = "") -> str | None:
    """The one line for a run the full disk stopped while it wrote a log (a checkpoint's own
    write failure says more: mbrl.runtime.checkpoint); None for any other OSError.
    ``resume``: the command that continues the run (default: :func:`resume_command`)."""
    if err.errno != errno.ENOSPC:
        return None
    what = f"the disk ran full writing {err.filename}" if err.filename else "the disk ran full"
    if not os.path.isfile(os.path.join(run_dir, "ckpt", "last.pt")):
        return (
            f"{what}: nothing was saved yet ({run_dir} holds no checkpoint); free some disk "
            "space, then run the command again to start afresh (this folder can be removed)"
        )
    return (
        f"{what}: ckpt/last.pt holds the run's last checkpoint; free some disk space, then "
        f"{resume or resume_command(run_dir)}"
    )


def quit_text(moment: str, run_dir: str, ckpt: CheckpointManager | None, profile: bool) -> str:
    """The one line Ctrl-C prints when it quits at once (``moment``: starting | running;
    ``ckpt``: the run's checkpoints, None before they are known)."""
    if profile:
        return "stopped the profiling window (Ctrl-C): no report was written"
    head = (
        "stopped while the run was starting (Ctrl-C)"
        if moment == STARTING
        else "quit at once without saving (Ctrl-C)"
    )
    if os.path.isfile(os.path.join(run_dir, "ckpt", "last.pt")):
        saved = None if ckpt is None else ckpt.saved_step
        step = "the run's last checkpoint" if saved is None else f"step {saved}"
        holds = "still holds" if moment == STARTING else "holds"
        return f"{head}: ckpt/last.pt {holds} {step}; continue with: {resume_command(run_dir)}"
    return (
        f"{head}: nothing was saved yet ({run_dir} holds no checkpoint); run the command again "
        "to start afresh (this folder can be removed)"
    )


class SkippedUpdates:
    """Watches SAC's skipped updates (a non-finite loss: ``learner/nonfinite_steps``) at each
    log line. The first skip is warned of once; a whole log interval of skips once more, as
    then SAC's weights no longer give a finite loss and no longer change: the run goes on
    without learning. ``line`` is the summary's count (empty while none was skipped)."""

    def __init__(self) -> None:
        self.skipped = self.updates = 0  # totals at the last log line
        self.since = 0  # that line's step
        self.warned: set[str] = set()
        self.who = ""  # a batch's seed: "seed 3 (<its folder>): " before each warning

    def resumed(self, step: int, skipped: int, updates: int) -> None:
        """A resumed run's totals at ``step``: skips before it were warned of then."""
        self.skipped, self.updates, self.since = skipped, updates, step
        if skipped:
            self.warned.add("first")

    def seen(self, step: int, values: dict[str, float | int]) -> str:
        """The warning due at this log line (``values``: the logged numbers), or ""."""
        if "learner/nonfinite_steps" not in values or "learner/updates" not in values:
            self.since = step  # (no update yet)
            return ""
        skipped, updates = int(values["learner/nonfinite_steps"]), int(values["learner/updates"])
        new, done = skipped - self.skipped, updates - self.updates
        text = ""
        if new and new == done and "all" not in self.warned:
            self.warned.update(("all", "first"))
            text = (
                f"SAC skipped all {done:,} of its updates between steps {self.since} and {step} "
                "(a non-finite loss each time): its weights no longer give a finite loss, so "
                "they no longer change and the run goes on without learning; lower "
                "agent.actor_lr / agent.critic_lr, or check an edited loss"
            )
        elif new and "first" not in self.warned:
            self.warned.add("first")
            text = (
                f"SAC skipped {new:,} of {done:,} updates between steps {self.since} and {step}: "
                "each had a non-finite loss (NaN or inf in its batch or its weights); the count "
                "goes on in learner/nonfinite_steps"
            )
        self.skipped, self.updates, self.since = skipped, updates, step
        return self.who + text if text else ""

    def line(self) -> str:
        if not self.skipped:
            return ""
        return f"{self.skipped:,} of {self.updates:,} SAC updates (a non-finite loss each)"


class ZeroedActions:
    """Watches the env steps whose action held NaN or inf (``collector/nonfinite_actions``; the
    collector acted with zeros instead). The first in this process is warned of once (each seed
    of a batch: its own): a policy that gives NaN from finite inputs has weights too large to
    compute with, and it does not recover by itself. ``line`` is the summary's count (empty
    while there was none), as of the last log line or the stop (``Trainer._recount``), like
    :class:`SkippedUpdates`'."""

    def __init__(self) -> None:
        self.count = 0  # the total at the last log line
        self.since = 0  # that line's step
        self.warned = False
        self.who = ""  # a batch's seed: "seed 3 (<its folder>): " before the warning

    def resumed(self, step: int, count: int) -> None:
        self.count, self.since = count, step

    def seen(self, step: int, values: dict[str, float | int]) -> str:
        """The warning due at this log line (``values``: the logged numbers), or ""."""
        count = int(values.get("collector/nonfinite_actions", self.count))
        new, since = count - self.count, self.since
        self.count, self.since = count, step
        if not new or self.warned:
            return ""
        self.warned = True
        return self.who + (
            f"the policy gave a non-finite action (NaN or inf) at {new:,} env steps between "
            f"steps {since} and {step}: each acted with zeros instead (as MuJoCo does with a "
            "NaN control), so no NaN reaches the buffers; its weights have diverged "
            "and will not recover by themselves: lower agent.actor_lr / agent.critic_lr, or "
            "check an edited actor; the count goes on in collector/nonfinite_actions"
        )

    def line(self) -> str:
        if not self.count:
            return ""
        return f"{self.count:,} env steps acted with zeros (the policy's action was not finite)"


def limit_note(cfg: Config, outcome: str) -> str:
    """After a stop, what the resume command keeps: the saved config's ``max_minutes``."""
    if outcome == "finished" or cfg.max_minutes is None:
        return ""
    return (
        f"the resume keeps max_minutes={cfg.max_minutes:g} (the run's config): it stops again "
        "after as long; max_minutes=null for no limit"
    )


def summary_text(t: Run, outcome: str) -> str:
    """``outcome``: finished, or what stopped the run (``Ctrl-C``, ``max_minutes=8 reached``)."""
    cfg, wall = t.cfg, t.timer.wall()
    head = (
        f"{'finished' if outcome == 'finished' else f'stopped ({outcome})'} at step "
        f"{t.env_steps} after {duration(wall)} in this process"
    )
    if t.timer.stopped() >= 1.0:  # (Ctrl-Z, kill -STOP: left out of every time here)
        head += f" (and {duration(t.timer.stopped())} stopped)"
    last = t.last_eval.get("eval/return_mean")
    evals = "none yet"
    if last is not None:
        evals = f"last {last:.1f}, best {t.best_return:.1f} (step {t.best_step})"
    grand = t.timer.grand
    phases = [
        f"{name} {duration(grand[name])} ({100 * grand[name] / max(wall, 1e-9):.0f} %)"
        for name in PHASE_ORDER
        if grand.get(name, 0.0) >= 0.05
    ]
    ckpt_dir = os.path.join(t.run_dir, "ckpt")
    files = ["last.pt"] + (["ckpt_best.pt"] if t.last_eval else [])
    if cfg.checkpoint.snapshots and t.last_eval:
        files.append("iteration_<N>.pt")
    resume = resume_command(t.run_dir)
    if outcome == "finished":
        resume += f" total_steps=<more than {cfg.total_steps}>"
    lines = {
        "eval return": evals,
        "time": ", ".join(phases),
        "1000 steps": per_thousand_steps(t),
        "ran": "; ".join(f"{RAN_NAMES[k]} {v}" for k, v in t.algo.ran().items()),
        "skipped": t.skips.line(),
        "zeroed": t.zeroed.line(),
        "checkpoints": f"{ckpt_dir}: {', '.join(files)}",
        "resume": resume,
        "limit": limit_note(cfg, outcome),
    }
    for key in ("1000 steps", "skipped", "zeroed", "limit"):
        if not lines[key]:
            del lines[key]
    if cfg.profile.enabled:  # a window of a run, not one to go on with
        del lines["resume"]
        lines.pop("limit", None)
    return f"{head}\n{start_block(lines)}"


def per_thousand_steps(t: Run) -> str:
    """Seconds per 1000 env steps by phase in this process: the model phases and SAC per
    step after the random ones (before them neither runs), the others per step."""
    start = t.resumed_at or 0
    steps = {"all": t.env_steps - start}
    steps["learning"] = t.env_steps - max(start, t.cfg.algorithm.init_steps)
    grand, parts = t.timer.grand, []
    for name in sorted(PHASE_ORDER, key=lambda p: -grand.get(p, 0.0)):
        n = steps["learning" if name in LEARNING_PHASES else "all"]
        if n > 0 and grand.get(name, 0.0) > 0:
            parts.append(f"{name} {1000 * grand[name] / n:.3g} s")
    if not parts:
        return ""
    random = max(t.cfg.algorithm.init_steps - start, 0)
    note = f"; model phases and SAC per step after the {random} random ones" if random else ""
    return ", ".join(parts) + f" (each phase's seconds per 1000 env steps{note})"
