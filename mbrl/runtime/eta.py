"""How long the rest of a run takes: the work its schedule has left, per phase, times the time
per unit of work this process has measured (seconds per SAC update, per model phase, per env
step, per evaluation). A model fit then adds to its own phase's total instead of making the
estimate jump, and the estimate shows where the rest of the run will go.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from mbrl.config import Config
from mbrl.runtime.progress import Progress, duration
from mbrl.runtime.timer import PhaseTimer

# phase -> the timer phases its seconds come from
PHASE_TIMERS = {
    "sac": ("sac",),
    "model": ("model", "rewarder", "rollout"),
    "env": ("env",),
    "eval": ("eval", "checkpoint"),
}
NAMES = {"sac": "SAC updates", "model": "model phases", "env": "env steps", "eval": "evaluations"}
MIN_UPDATES = 100  # SAC updates timed before the estimate is trusted


def multiples(every: int, start: int, stop: int) -> int:
    """How many multiples of ``every`` lie in [start, stop)."""
    if stop <= start:
        return 0
    return (stop - 1) // every - (start - 1) // every


def work_left(cfg: Config, env_steps: int) -> dict[str, float]:
    """The work a run has left after ``env_steps``, per phase (one env copy's schedule)."""
    total, init, g = cfg.total_steps, cfg.algorithm.init_steps, cfg.algorithm.updates_per_step
    left = {
        "env": float(total - env_steps),
        "sac": float(max(total - max(env_steps, init), 0) * g),
        # evaluations at multiples of eval.every from this step on, and the last step's
        "eval": float(multiples(cfg.eval.every, env_steps, total) + 1),
        "model": 0.0,
    }
    if cfg.algorithm.name == "mbpo":  # model phases at multiples of the frequency from init
        left["model"] = float(multiples(cfg.mbpo.model_train_freq, max(env_steps, init), total))
    return left


@dataclass
class RunClock:
    """The estimate of one run (``done``: work done in this process, per phase)."""

    cfg: Config
    done: dict[str, float]
    shown: bool = False  # the estimate by phase has been printed
    _last: float = 0.0

    @classmethod
    def start(cls, cfg: Config) -> RunClock:
        return cls(cfg, dict.fromkeys(PHASE_TIMERS, 0.0))

    def ready(self, env_steps: int) -> bool:
        """Every phase with work left has been timed in this process (SAC: MIN_UPDATES).
        Never in a profiling window: its report projects the run it stands for instead."""
        if self.cfg.profile.enabled:
            return False
        for phase, left in work_left(self.cfg, env_steps).items():
            done = self.done[phase]
            if left > 0 and (done <= 0 or (phase == "sac" and done < MIN_UPDATES)):
                return False
        return True

    def seconds_left(self, grand: dict[str, float], env_steps: int) -> dict[str, float]:
        """Seconds per phase the rest of the run takes (once :meth:`ready`)."""
        out = {}
        for phase, left in work_left(self.cfg, env_steps).items():
            if left > 0:
                spent = sum(grand.get(t, 0.0) for t in PHASE_TIMERS[phase])
                out[phase] = spent / self.done[phase] * left
        return out

    def tick(self, progress: Progress, timer: PhaseTimer, env_steps: int) -> None:
        """The bar's ETA, at most once a second (reading CUDA timers waits for the device);
        the first time the rates are known, also the time left by phase, above the bar."""
        if not self.ready(env_steps) or (self.shown and not self._due()):
            return
        left = self.seconds_left(timer.grand, env_steps)
        progress.eta(sum(left.values()))
        if not self.shown:
            self.shown = True
            progress.write(estimate_text(left))

    def _due(self, every: float = 1.0) -> bool:
        now = time.perf_counter()
        if now - self._last < every:
            return False
        self._last = now
        return True


def estimate_text(left: dict[str, float]) -> str:
    """``about 11 h 25 min more: SAC updates 6 h 02 min, model phases 5 h 10 min, ...``."""
    parts = ", ".join(
        f"{NAMES[p]} {duration(s)}" for p, s in sorted(left.items(), key=lambda kv: -kv[1])
    )
    return (
        f"estimated time to finish: about {duration(sum(left.values()))} ({parts}; "
        "from this process's rates so far: model fits take longer as the data grows)"
    )
