"""How long a run takes, phase by phase: one projection (:func:`time_left`), used by the
training ETA (:class:`RunClock`) and by ``profile=true``'s report (:func:`whole_run`).

A phase's time is its work, as the run's schedule gives it, times the seconds per unit of work
measured so far (in this run, or in a profiling window). A model fit's time is its rows times
its epochs. The first fit starts from random weights and runs long; every later one starts
from the one before, and the first later fits still run long, then settle at about the same
epochs whatever their rows (:func:`plateau`). So the next later fit is taken to need the
last three's mean epochs moved 30 % of the way to the plateau, and each one after it 30 % of
the gap left (:class:`FitEpochs`).
docs/usage.md gives the evidence: recorded Hopper and Walker2d runs replayed by
``scripts/eta_backtest.py``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from mbrl.config import Config
from mbrl.models.training import holdout_rows
from mbrl.runtime.progress import Progress, duration
from mbrl.runtime.timer import PhaseTimer
from mbrl.schedule import (
    first_model_phase,
    model_phase_steps,
    rollout_length,
    run_length,
    sac_updates,
)

# The phases projected (each timed as the timer phase of its name) and their names in the
# estimate; units: an env step, a SAC update, a training row through one epoch of a fit, a
# rollout start state through one model step (the schedule's, whether or not the rollout
# ended early), a model phase, an evaluation episode, a checkpoint
NAMES = {
    "env": "env steps",
    "sac": "SAC updates",
    "model": "model fits",
    "rollout": "rollouts",
    "rewarder": "rewarder fits",
    "eval": "evaluations",
    "checkpoint": "checkpoints",
}
TIMERS = tuple(NAMES)
MIN_WORK = {"sac": 100}  # units timed before a rate is trusted (else 1)


TRANSIENT = 16  # later fits after which they are taken to have settled (4000 steps at MBPO's)
SETTLED = 4  # fits past the transient whose mean is the plateau, at least
LAST = 3  # later fits whose mean is where the next one starts from
SETTLE = 0.7  # each later fit's epochs close 30 % of the gap left to the plateau


@dataclass(frozen=True)
class FitEpochs:
    """Epochs per model fit: the run's ``first`` (from random weights); ``last``, the mean of
    its last :data:`LAST` later fits; ``settled``, the mean of its later fits past the first
    :data:`TRANSIENT` (None before :data:`SETTLED` of them)."""

    first: float
    last: float
    settled: float | None = None

    def later(self, ahead: int, plateau: float) -> float:
        """The epochs of the later fit ``ahead`` fits from now (0: the next one): from
        ``last`` toward ``plateau`` (:func:`plateau`), :data:`SETTLE` of the gap left per fit;
        never below it."""
        start = max(self.last, plateau)
        return plateau + (start - plateau) * SETTLE ** (ahead + 1)


def plateau(cfg: Config, epochs: FitEpochs | None = None) -> float:
    """The epochs later fits settle at, whatever their rows: 4 x ``model.patience`` (20 at
    MBPO's 5), or the run's own (the mean of its later fits past the first
    :data:`TRANSIENT`) once it has made :data:`SETTLED` of them, within the early stop's
    fewest (``model.patience`` + 2, the first epoch always improving) and 4 x patience. Two
    Hopper-v4 Gaussian runs' later fits took 19-23 epochs on average on 12,600-40,000 rows
    alike; two Walker2d-v4 runs' fell to the early stop's 7 from ~8,000 rows on
    (docs/usage.md). That 20 grows with the patience (a longer wait for a 1 % gain) is a
    guess: only patience 5 was measured."""
    fewest = cfg.model.patience + 2
    most = float(max(4 * cfg.model.patience, fewest))
    if epochs is None or epochs.settled is None:
        return most
    return min(max(epochs.settled, float(fewest)), most)


def evaluations(cfg: Config, env_steps: int = 0) -> int:
    """Evaluations, each with a checkpoint, from ``env_steps`` to the run's end: at the
    multiples of ``eval.every`` in [env_steps, end) (from step 1), and the last step's."""
    total, every, start = run_length(cfg), cfg.eval.every, max(env_steps, 1)
    return max((total - 1) // every - (start - 1) // every, 0) + 1


def time_left(
    cfg: Config, env_steps: int, rates: dict[str, float], epochs: FitEpochs
) -> dict[str, float]:
    """Seconds per phase from ``env_steps`` to the run's end (0: the whole run); ``rates``:
    seconds per unit of work, per phase (one env copy's schedule; phases with no work left
    are left out)."""
    total = run_length(cfg)
    left = {
        "env": float(total - env_steps),
        "sac": float(sac_updates(cfg, env_steps)),
        "checkpoint": float(evaluations(cfg, env_steps)),
    }
    left["eval"] = left["checkpoint"] * cfg.eval.episodes
    seconds = {p: w * rates[p] for p, w in left.items() if w > 0 and env_steps < total}
    if cfg.algorithm.name == "mbpo":
        model = _model_phases(cfg, env_steps, rates, epochs)
        seconds.update({p: s for p, s in model.items() if s > 0})
    return seconds


def phases_left(cfg: Config, env_steps: int) -> set[str]:
    """The phases :func:`time_left` counts work for (without counting it)."""
    if env_steps >= run_length(cfg):
        return set()
    out = {"env", "eval", "checkpoint"} | ({"sac"} if sac_updates(cfg, env_steps) else set())
    if cfg.algorithm.name == "mbpo" and model_phase_steps(cfg, env_steps):
        out |= {"model", "rollout"} | ({"rewarder"} if cfg.rewarder.mode != "none" else set())
    return out


def _model_phases(
    cfg: Config, start: int, rates: dict[str, float], epochs: FitEpochs
) -> dict[str, float]:
    """Seconds of the model phases at multiples of ``mbpo.model_train_freq`` from
    ``algorithm.init_steps`` on, within the run's own caps per fit."""
    cap, limit, first = cfg.model.max_epochs, cfg.model.max_seconds, first_model_phase(cfg)
    settled, ahead = plateau(cfg, epochs), 0
    out = dict.fromkeys(("model", "rollout", "rewarder"), 0.0)
    for step in model_phase_steps(cfg, start):
        real = min(step, cfg.buffer.capacity)  # the real buffer's rows, less the holdout
        rows = real - holdout_rows(real, cfg.model)
        if step == first:
            n = epochs.first
        else:
            n, ahead = epochs.later(ahead, settled), ahead + 1
        fit = rows * (n if cap is None else min(n, cap)) * rates["model"]
        out["model"] += fit if limit is None else min(fit, limit)
        out["rollout"] += cfg.rollout.batch_size * rollout_length(step, cfg) * rates["rollout"]
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
    resumed: float = 0.0  # row-epochs of a paused fit that an earlier process ran and timed
    last: list[float] = field(default_factory=list)  # the last LAST later fits' epochs
    settled: tuple[int, float] = (0, 0.0)  # later fits past the first TRANSIENT: count, epochs

    def model_phase(self, metrics: dict[str, Any], rewarder: bool) -> None:
        """Count one model phase from its metrics (plain numbers: epochs, rows, length). A fit
        paused by a stop and resumed reports all its epochs; this process timed only the rest
        (the rate is its timer's seconds over the row-epochs it ran)."""
        epochs, rows = float(metrics["model/epochs"]), float(metrics["model/train_rows"])
        self.done["model"] += max(rows * epochs - self.resumed, 0.0)
        self.resumed = 0.0
        self.done["rollout"] += float(metrics["rollout/start_states"] * metrics["rollout/length"])
        self.done["rewarder"] += float(rewarder)
        if self.fits == 0:
            self.first_epochs = epochs
        else:
            self.later = (self.later[0] + 1, self.later[1] + epochs)
            self.last = [*self.last, epochs][-LAST:]
            if self.later[0] > TRANSIENT:
                self.settled = (self.settled[0] + 1, self.settled[1] + epochs)
        self.fits += 1

    def epochs(self) -> FitEpochs:
        """Epochs per fit: the first's as it ran; the later fits' last :data:`LAST` mean and
        settled mean (before any later fit, the first stands for them). A checkpoint written
        before these were saved leaves them empty: the later fits' mean so far stands for the
        last ones until this process has made some, and the settled mean waits for
        :data:`SETTLED` fits made here."""
        (count, summed), first = self.later, self.first_epochs
        if not count:
            return FitEpochs(first or 0.0, first or 0.0)
        last = statistics.mean(self.last) if self.last else summed / count
        n, total = self.settled
        settled = total / n if n >= SETTLED else None
        return FitEpochs(last if first is None else first, last, settled)

    def rates(self, grand: dict[str, float], least: int | None = None) -> dict[str, float]:
        """Seconds per unit of each phase timed on enough work (``grand``: the timer's;
        ``least``: units enough for every phase, instead of :data:`MIN_WORK`'s)."""
        return {p: grand.get(p, 0.0) / self.done[p] for p in TIMERS if self.timed(p, least)}

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
        if not self.shown and left:  # (nothing left: the run is at its last step)
            self.shown = True
            progress.write(estimate_text(left, self.work, self.cfg, bool(self.saved)))

    def _due(self, every: float = 1.0) -> bool:
        now = time.perf_counter()
        if now - self._last < every:
            return False
        self._last = now
        return True

    def state_dict(self, grand: dict[str, float], paused: int = 0) -> dict[str, Any]:
        """The rates and fit epochs so far: a resumed run estimates from its first step.
        ``paused``: rows x epochs of a fit a stop paused, timed here but counted by no model
        phase yet (the process that resumes it leaves them out: :meth:`load_state_dict`)."""
        w = self.work
        # (A fit this process resumed and paused again: the resumed part is the earlier one's.)
        ran = Work({**w.done, "model": w.done["model"] + max(paused - w.resumed, 0.0)})
        rates = {**self.saved, **ran.rates(grand)}
        later = {"later": w.later, "last": list(w.last), "settled": w.settled}
        return {"rates": rates, "fits": w.fits, "first_epochs": w.first_epochs, **later}

    def load_state_dict(self, state: dict[str, Any] | None, fits: int, paused: int = 0) -> None:
        """``state`` None (a checkpoint from before the estimate was saved): rates come from
        this process; ``fits``, the model's fits so far, still tells the first from later.
        ``paused``: rows x epochs the checkpoint's paused fit ran (the next model phase, which
        finishes it, counts only the rest as this process's work)."""
        self.work.resumed = float(paused)
        if state is None:
            self.work.fits = fits
            return
        self.saved = dict(state["rates"])
        self.work.fits, self.work.first_epochs = state["fits"], state["first_epochs"]
        count, epochs = state["later"]
        self.work.later = (int(count), float(epochs))
        self.work.last = [float(e) for e in state.get("last", ())]  # (absent: not saved)
        n, settled = state.get("settled", (0, 0.0))
        self.work.settled = (int(n), float(settled))


def estimate_text(left: dict[str, float], work: Work, cfg: Config, resumed: bool) -> str:
    """``about 11 h 25 min (model fits 6 h 02 min, SAC updates 5 h 10 min, ...; ...)``."""
    parts = ", ".join(
        f"{NAMES[p]} {duration(s)}" for p, s in sorted(left.items(), key=lambda kv: -kv[1])
    )
    source = "this run's rates so far" + (", from before the resume at first" if resumed else "")
    count = work.later[0]
    if cfg.algorithm.name == "mbpo" and count:
        source += f"; {later_text(work.epochs(), cfg, count)}"
    return f"estimated time to finish: about {duration(sum(left.values()))} ({parts}; {source})"


def whole_run(
    cfg: Config, work: Work, grand: dict[str, float], cap: int | None
) -> tuple[dict[str, float], str]:
    """``profile=true``'s projection (docs/usage.md): seconds per phase of the whole run ``cfg``
    describes, from a profiling window's ``work`` and timers (compile warm-up not included), and
    where its epochs per fit come from: its first fit's, and its second's as the later fits'
    start (``cap``: the window's ``profile.model_epochs``, whose capped epochs are counted as
    such)."""
    epochs = work.epochs()
    how = f"the first fit {epochs.first:.0f} epochs"
    if cap is not None:
        how += f" (capped at {cap} in the window: fewer than a run's)"
    how += f", {later_text(epochs, cfg, 1)}"
    if cap is None and epochs.last > plateau(cfg, epochs):
        how += ", from what the window's second fit took"
    return time_left(cfg, 0, work.rates(grand, least=1), epochs), how


def later_text(epochs: FitEpochs, cfg: Config, count: int) -> str:
    """``later fits from 45 epochs (the last 3's mean) to 20 (4 x model.patience), 30 %
    nearer each fit``; ``count``: the later fits made so far."""
    settled, cap = plateau(cfg, epochs), cfg.model.max_epochs
    if cap is not None and min(epochs.last, settled) >= cap:  # (every later fit at the cap)
        return f"later fits {cap} epochs each (model.max_epochs)"
    capped = "" if cap is None or max(epochs.last, settled) <= cap else f", at most {cap} each"
    why = "4 x model.patience" if epochs.settled is None else f"their mean past the {TRANSIENT}th"
    if epochs.last <= settled:
        return f"later fits {settled:.0f} epochs each ({why}){capped}"
    source = "the one so far" if count == 1 else f"the last {min(count, LAST)}'s mean"
    start = f"from {epochs.last:.0f} epochs ({source}) to {settled:.0f} ({why})"
    text = f"later fits {start}, {1 - SETTLE:.0%} nearer each fit".replace("%", " %")
    return text + (capped and f"{capped} (model.max_epochs)")


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
