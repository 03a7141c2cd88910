"""How long a run takes, phase by phase: one projection (:func:`time_left`), used by the
training ETA (:class:`RunClock`) and by ``profile=true``'s report (:func:`whole_run`).

A phase's time is its work times the seconds per unit of work measured so far (in this run,
or in a profiling window). The work follows from the run's schedule: SAC updates, env steps,
evaluations and checkpoints, and at each model phase a fit of the real buffer's rows (less the
holdout) for some epochs, then rollouts of the scheduled length. A fit's time is proportional
to its rows times its epochs, so the fits grow with the data. How many epochs a fit needs is
measured too: MBPO trains one model all run long, so the first fit starts from random weights
and runs long (Hopper: 140 epochs for the flow, 286 for the Gaussian), while every later fit
starts from the previous one and early stopping ends it sooner (Hopper: median 18 and 19,
docs/hopper.md; on a few hundred rows, 50 to 90). Nothing fixes that number in advance, so
the estimate waits for a later fit, and takes the mean of the later fits so far.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mbrl.config import Config
from mbrl.runtime.progress import Progress, duration
from mbrl.runtime.timer import PhaseTimer
from mbrl.schedule import rollout_length, run_length

# phase -> the timer phases its seconds come from; units: an env step, a SAC update, a
# training row through one epoch of a fit, a rollout start state through one model step (the
# schedule's, whether or not the rollout ended early), a model phase, an evaluation episode,
# a checkpoint
TIMERS = {
    "env": ("env",),
    "sac": ("sac",),
    "model": ("model",),
    "rollout": ("rollout",),
    "rewarder": ("rewarder",),
    "eval": ("eval",),
    "checkpoint": ("checkpoint",),
}
NAMES = {
    "sac": "SAC updates",
    "model": "model fits",
    "rollout": "rollouts",
    "env": "env steps",
    "rewarder": "rewarder fits",
    "eval": "evaluations",
    "checkpoint": "checkpoints",
}
MIN_WORK = {"sac": 100}  # units timed before a rate is trusted (else 1)


@dataclass
class FitEpochs:
    """Epochs per model fit: the run's first fit, and each later one."""

    first: float
    later: float


def multiples(every: int, start: int, stop: int) -> int:
    """How many multiples of ``every`` lie in [start, stop)."""
    if stop <= start:
        return 0
    return (stop - 1) // every - (start - 1) // every


def train_rows(cfg: Config, env_steps: int) -> int:
    """Rows a model fit at ``env_steps`` trains on: the real buffer less the holdout."""
    n = min(env_steps, cfg.buffer.capacity)
    return n - max(1, min(int(n * cfg.model.holdout_ratio), cfg.model.max_holdout))


def time_left(
    cfg: Config, env_steps: int, rates: dict[str, float], epochs: FitEpochs
) -> dict[str, float]:
    """Seconds per phase from ``env_steps`` to the run's end (0: the whole run); ``rates``:
    seconds per unit of work, per phase (one env copy's schedule; phases with no work left
    are left out)."""
    total, init, g = run_length(cfg), cfg.algorithm.init_steps, cfg.algorithm.updates_per_step
    left = {
        "env": float(total - env_steps),
        "sac": float(max(total - max(env_steps, init), 0) * g),
        # evaluations (each with a checkpoint) at multiples of eval.every, and the last step's
        "checkpoint": float(multiples(cfg.eval.every, max(env_steps, 1), total) + 1),
    }
    left["eval"] = left["checkpoint"] * cfg.eval.episodes
    seconds = {p: w * rates[p] for p, w in left.items() if w > 0 and env_steps < total}
    if cfg.algorithm.name == "mbpo":
        model = _model_phases(cfg, env_steps, total, rates, epochs)
        seconds.update({p: s for p, s in model.items() if s > 0})
    return seconds


def phases_left(cfg: Config, env_steps: int) -> set[str]:
    """The phases :func:`time_left` counts work for (without counting it)."""
    total, init = run_length(cfg), cfg.algorithm.init_steps
    if env_steps >= total:
        return set()
    out = {"env", "eval", "checkpoint"} | ({"sac"} if total > max(env_steps, init) else set())
    freq = cfg.mbpo.model_train_freq
    first = max(-(-max(init, 1) // freq) * freq, -(-env_steps // freq) * freq)
    if cfg.algorithm.name == "mbpo" and first < total:
        out |= {"model", "rollout"} | ({"rewarder"} if cfg.rewarder.mode != "none" else set())
    return out


def _model_phases(
    cfg: Config, start: int, total: int, rates: dict[str, float], epochs: FitEpochs
) -> dict[str, float]:
    """Seconds of the model phases at multiples of ``mbpo.model_train_freq`` from
    ``algorithm.init_steps`` on, within the run's own caps per fit."""
    freq, cap, limit = cfg.mbpo.model_train_freq, cfg.model.max_epochs, cfg.model.max_seconds
    first = -(-max(cfg.algorithm.init_steps, 1) // freq) * freq
    out = dict.fromkeys(("model", "rollout", "rewarder"), 0.0)
    for step in range(max(first, -(-start // freq) * freq), total, freq):
        n = epochs.first if step == first else epochs.later
        fit = train_rows(cfg, step) * (n if cap is None else min(n, cap)) * rates["model"]
        out["model"] += fit if limit is None else min(fit, limit)
        length = rollout_length(step, cfg)
        out["rollout"] += cfg.rollout.batch_size * length * rates["rollout"]
        if cfg.rewarder.mode != "none":
            out["rewarder"] += rates["rewarder"]
    return out


@dataclass
class Work:
    """Work done per phase (in the units of :data:`TIMERS`), and the epochs of the fits."""

    done: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIMERS, 0.0))
    fits: int = 0  # the run's, all processes
    first_epochs: float | None = None  # the run's first fit (from random weights)
    later: tuple[int, float] = (0, 0.0)  # the fits after the first: how many, epochs summed

    def model_phase(self, metrics: dict[str, Any], rewarder: bool) -> None:
        """Count one model phase from its metrics (plain numbers: epochs, rows, length)."""
        epochs = float(metrics["model/epochs"])
        self.done["model"] += float(metrics["model/train_rows"]) * epochs
        self.done["rollout"] += float(metrics["rollout/start_states"] * metrics["rollout/length"])
        self.done["rewarder"] += float(rewarder)
        if self.fits == 0:
            self.first_epochs = epochs
        else:
            self.later = (self.later[0] + 1, self.later[1] + epochs)
        self.fits += 1

    def epochs(self) -> FitEpochs:
        """Epochs per fit: the first's as it ran, the later fits' mean so far (each stands
        for the other until both are known; 0 before any fit)."""
        count, summed = self.later
        first = self.first_epochs
        later = summed / count if count else (first or 0.0)
        return FitEpochs(later if first is None else first, later)

    def rates(self, grand: dict[str, float], least: int | None = None) -> dict[str, float]:
        """Seconds per unit of each phase timed on enough work (``grand``: the timer's;
        ``least``: units enough for every phase, instead of :data:`MIN_WORK`'s)."""
        return {
            phase: sum(grand.get(t, 0.0) for t in timers) / self.done[phase]
            for phase, timers in TIMERS.items()
            if self.timed(phase, least)
        }

    def timed(self, phase: str, least: int | None = None) -> bool:
        return self.done[phase] >= (MIN_WORK.get(phase, 1) if least is None else least)


@dataclass
class RunClock:
    """The training ETA: the work this process has timed, and the rates a resumed run's
    checkpoint holds, for the phases this process has not timed yet."""

    cfg: Config
    work: Work = field(default_factory=Work)
    saved: dict[str, float] = field(default_factory=dict)  # seconds per unit, before a resume
    shown: bool = False  # the estimate by phase has been printed
    _last: float = 0.0

    def ready(self, env_steps: int) -> bool:
        """Every phase with work left has a rate, and a fit after the first has run if later
        ones are to come. Never in a profiling window: its report projects the run instead."""
        if self.cfg.profile.enabled:
            return False
        left = phases_left(self.cfg, env_steps)
        if "model" in left and self.work.fits and not self.work.later[0]:
            return False  # (the first fit, from random weights, says little of the others)
        return all(self.work.timed(p) or p in self.saved for p in left)

    def seconds_left(self, grand: dict[str, float], env_steps: int) -> dict[str, float]:
        """Seconds per phase the rest of the run takes (once :meth:`ready`)."""
        rates = {**self.saved, **self.work.rates(grand)}
        return time_left(self.cfg, env_steps, rates, self.work.epochs())

    def tick(self, progress: Progress, timer: PhaseTimer, env_steps: int) -> None:
        """The bar's ETA, at most once a second (reading CUDA timers waits for the device);
        the first time the rates are known, also the time left by phase, above the bar."""
        if not self.ready(env_steps) or (self.shown and not self._due()):
            return
        left = self.seconds_left(timer.grand, env_steps)
        progress.eta(sum(left.values()))
        if not self.shown:
            self.shown = True
            progress.write(estimate_text(left, self.work, self.cfg, bool(self.saved)))

    def _due(self, every: float = 1.0) -> bool:
        now = time.perf_counter()
        if now - self._last < every:
            return False
        self._last = now
        return True

    def state_dict(self, grand: dict[str, float]) -> dict[str, Any]:
        """The rates and fit epochs so far: a resumed run estimates from its first step."""
        w = self.work
        rates = {**self.saved, **w.rates(grand)}
        return {"rates": rates, "fits": w.fits, "first_epochs": w.first_epochs, "later": w.later}

    def load_state_dict(self, state: dict[str, Any] | None, fits: int) -> None:
        """``state`` None (a checkpoint from before the estimate was saved): rates come from
        this process; ``fits``, the model's fits so far, still tells the first from later."""
        if state is None:
            self.work.fits = fits
            return
        self.saved = dict(state["rates"])
        self.work.fits, self.work.first_epochs = state["fits"], state["first_epochs"]
        count, epochs = state["later"]
        self.work.later = (int(count), float(epochs))


def estimate_text(left: dict[str, float], work: Work, cfg: Config, resumed: bool) -> str:
    """``about 11 h 25 min (model fits 6 h 02 min, SAC updates 5 h 10 min, ...; ...)``."""
    parts = ", ".join(
        f"{NAMES[p]} {duration(s)}" for p, s in sorted(left.items(), key=lambda kv: -kv[1])
    )
    source = "this run's rates so far" + (", from before the resume at first" if resumed else "")
    count = work.later[0]
    if cfg.algorithm.name == "mbpo":
        later = f"{work.epochs().later:.0f} epochs, the mean of the {count} after the first"
        source += f"; model fits grow with the data, {later}" if count else ""
    return f"estimated time to finish: about {duration(sum(left.values()))} ({parts}; {source})"


def whole_run(
    cfg: Config, work: Work, grand: dict[str, float], cap: int | None
) -> tuple[dict[str, float], str]:
    """``profile=true``'s projection: seconds per phase of the whole run ``cfg`` describes,
    from a profiling window's ``work`` and timers (compile warm-up not included), and where
    its epochs per fit come from (``cap``: the window's own, ``profile.model_epochs``). The
    window's shares say little of a run, whose fits grow with the data; its first fit starts
    from random weights and its second from the first, as a run's later fits do."""
    epochs = work.epochs()
    how = f"the first fit {epochs.first:.0f} epochs, later fits {epochs.later:.0f}, as the "
    how += "window's two fits took" if cap is None else f"window's, capped at {cap}: fewer"
    return time_left(cfg, 0, work.rates(grand, least=1), epochs), how


def whole_run_text(cfg: Config, seconds: dict[str, float], epochs: str) -> str:
    """The projected whole run, phase by phase, with what it assumes."""
    total = sum(seconds.values())
    lines = [
        f"a whole run of this config ({cfg.total_steps:,} env steps), projected from the "
        "window's rates and the run's schedule:",
        f"{'phase':<11}{'time':>14}{'share':>8}",
        "-" * 33,
    ]
    for name, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"{name:<11}{duration(secs):>14}{100 * secs / max(total, 1e-9):>7.0f}%")
    lines += ["-" * 33, f"{'total':<11}{duration(total):>14}"]
    if cfg.algorithm.name == "mbpo":
        lines.append(
            f"(model: a fit's time is its rows x epochs, {epochs}. rollout: full-length "
            "rollouts, an upper bound. Compile warm-up not included. A training run "
            "estimates its time left the same way, from its own rates and fits.)"
        )
    return "\n".join(lines)
