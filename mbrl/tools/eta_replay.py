"""A run's time-left estimate replayed from its metrics, and checked against the wall clock.

:func:`clock_at` feeds a :class:`~mbrl.runtime.eta.RunClock` what the run had logged up to a
log step (its model phases, evaluations, SAC updates and phase timers), so the estimate can be
had at any log step of a finished run. :func:`wall_check` then sets the time it projects from
a step to each later log step against the wall-clock time the run took to get there, within
one process (a resume's gap is no part of the run's pace). ``scripts/eta_check.py`` prints it.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from mbrl.config import Config
from mbrl.runtime.eta import TIMERS, RunClock, Work, time_left
from mbrl.runtime.timer import resumed_between
from mbrl.runtime.validate import validate

Row = dict[str, Any]


def run_config(path: str, total_steps: int | None = None) -> Config:
    """A run folder's config as a replay reads it: on the CPU (no device needed), not a
    resume, to ``total_steps`` where given (the step the estimate runs to)."""
    raw = OmegaConf.load(os.path.join(path, "config.yaml"))
    if not isinstance(raw, DictConfig) or "env" not in raw:  # (empty: not written yet)
        raise ValueError(f"{path}/config.yaml holds no run's config")
    raw.resume, raw.device = None, "cpu"
    if total_steps is not None:
        raw.total_steps = total_steps
    return validate(raw)


def clock_at(cfg: Config, rows: list[Row], at: int) -> tuple[RunClock, dict[str, float]]:
    """The estimate as the run had it at step ``at`` (a log step): its model phases, updates,
    evaluations and phase timers up to there; and the timers' seconds per phase."""
    clock, grand = RunClock(cfg), dict.fromkeys(TIMERS, 0.0)
    for r in (r for r in rows if r["step"] <= at):
        if r["step"] < at:  # (a phase or evaluation at ``at`` is timed after its log)
            _count(cfg, clock.work, r)
        if "time/wall" in r:
            grand = {p: grand[p] + r.get(f"time/{p}", 0.0) for p in TIMERS}
            clock.work.done["sac"] = r.get("learner/updates", 0)
    clock.work.done["env"] = float(at)
    return clock, grand


def _count(cfg: Config, work: Work, row: Row) -> None:
    """Count a logged model phase or evaluation (with its checkpoint) as work done."""
    if "model/epochs" in row:
        work.model_phase(row, rewarder=cfg.rewarder.mode != "none")
    elif "eval/return_mean" in row:
        work.done["eval"] += cfg.eval.episodes
        work.done["checkpoint"] += 1


def whole_intervals(rows: list[Row], after: int) -> list[Row]:
    """The log rows after ``after`` whose interval one process ran whole (no resume inside:
    :func:`~mbrl.runtime.timer.resumed_between`)."""
    timed = [r for r in rows if "time/wall" in r]
    return [
        b for a, b in itertools.pairwise(timed) if b["step"] > after and not resumed_between(a, b)
    ]


def first_estimate(cfg: Config, rows: list[Row]) -> int | None:
    """The first log step at which the run's estimate was ready (every phase with work left
    timed, a later fit made), or None."""
    for r in rows:
        if "time/wall" in r and clock_at(cfg, rows, r["step"])[0].ready(r["step"]):
            return int(r["step"])
    return None


@dataclass(frozen=True)
class Point:
    """At log step ``step``: the wall-clock seconds since the estimate's step, and the seconds
    the estimate projected for them."""

    step: int
    took: float
    projected: float


def process_rates(cfg: Config, rows: list[Row], at: int) -> dict[str, float]:
    """Seconds per unit of work as the process that logged ``at`` timed them: over its whole
    log intervals up to ``at`` (after the last resume), for phases it timed enough of (as a
    running estimate prefers its own process's rates to those its checkpoint saved)."""
    timed = [r for r in rows if "time/wall" in r and r["step"] <= at]
    ours: list[tuple[Row, Row]] = []
    for a, b in itertools.pairwise(timed):
        # (a resume: a new process from b, whose intervals start afresh)
        ours = [] if resumed_between(a, b) else [*ours, (a, b)]
    work, grand = Work(), dict.fromkeys(TIMERS, 0.0)
    for a, b in ours:
        grand = {p: grand[p] + b.get(f"time/{p}", 0.0) for p in TIMERS}
        work.done["env"] += b["step"] - a["step"]
        work.done["sac"] += b.get("learner/updates", 0) - a.get("learner/updates", 0)
        for r in rows:
            if a["step"] <= r["step"] < b["step"]:  # (timed in the interval after a's log)
                _count(cfg, work, r)
    return work.rates(grand)


def wall_check(cfg: Config, rows: list[Row], at: int) -> list[Point]:
    """From log step ``at``, for each later log step the same process reached without a
    resume: the time the run took to get there, and what the estimate at ``at`` projected
    (the run's fits so far; its own process's rates where it had timed them, else the whole
    run's)."""
    clock, grand = clock_at(cfg, rows, at)
    rates = {**clock.work.rates(grand), **process_rates(cfg, rows, at)}
    epochs = clock.work.epochs()

    def left(step: int) -> float:
        return sum(time_left(cfg, step, rates, epochs).values())

    timed = [r for r in rows if "time/wall" in r]
    start = next(r for r in timed if r["step"] == at)
    out, stopped = [], 0.0  # (seconds the process stood stopped: Ctrl-Z, kill -STOP)
    for a, b in itertools.pairwise(r for r in timed if r["step"] >= at):
        if resumed_between(a, b):
            break  # (a resume: the process that made the estimate ended here)
        stopped += b.get("time/paused", 0.0)
        took = b["time"] - start["time"] - stopped
        out.append(Point(int(b["step"]), took, left(at) - left(b["step"])))
    return out
