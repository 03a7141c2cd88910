"""``scripts/seeds.py``'s time left for a whole campaign: each run's own time-left estimate,
replayed from its metrics (:mod:`mbrl.tools.eta_replay`, the estimate its progress bar
shows), a run not started yet at the pace of the runs of its variant that have one, and the
runs laid out ``--procs`` at a time in the order they start (:func:`finish`).

What it leaves out: runs that fail, a machine (GPU or cores) shared differently as runs end
(each run's rates are those it had with the others beside it), and the stops and starts
between ``--stage`` targets (each run is counted to the last one). docs/usage.md ("Many
seeds", Progress) gives how it held.
"""

from __future__ import annotations

import heapq
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from omegaconf.errors import OmegaConfBaseException

from mbrl.config import Config
from mbrl.runtime.eta import FitEpochs, time_left
from mbrl.runtime.progress import duration
from mbrl.tools.eta_replay import clock_at, process_rates, run_config
from mbrl.tools.plotting import read_metrics
from mbrl.tools.seed_runs import Batch, Job, members

Row = dict[str, Any]
# Seconds a process takes outside its run's clock: imports and building before it, the last
# report after it (Pendulum runs on the 2-core CPU VM: 8 s before, 2-3 s after)
START = 15.0


@dataclass(frozen=True)
class Pace:
    """What a run's metrics say of its pace, once its own estimate is ready: its rates and
    fit epochs at its last log step, and its processes' compile warm-up."""

    cfg: Config
    rates: dict[str, float]  # seconds per unit of work, per phase
    epochs: FitEpochs  # as the run has them now
    early: FitEpochs  # as a new run would: its first fit's epochs, then its second's
    warmup: float  # seconds of compile warm-up per process (the mean)
    step: int  # its last log step
    time: float  # that log row's time (seconds since the epoch)

    def left(self, step: int) -> float:
        """Seconds from ``step`` to the run's end at this pace."""
        return sum(time_left(self.cfg, step, self.rates, self.epochs).values())

    def new_run(self) -> float:
        """Seconds a new run of this config takes at this pace, its start included."""
        seconds = sum(time_left(self.cfg, 0, self.rates, self.early).values())
        return seconds + self.warmup + START


def pace(cfg: Config, rows: Sequence[Row]) -> Pace | None:
    """The pace at the last log step of ``rows``, or None before the run's estimate is ready
    (every phase with work left timed, a fit after the first made)."""
    timed = [r for r in rows if "time/wall" in r]
    if not timed:
        return None
    at = int(timed[-1]["step"])
    clock, grand = clock_at(cfg, list(rows), at)
    if not clock.ready(at):
        return None
    rates = {**clock.work.rates(grand), **process_rates(cfg, list(rows), at)}
    epochs = clock.work.epochs()
    fits = [float(r["model/epochs"]) for r in rows if "model/epochs" in r]
    early = FitEpochs(epochs.first, fits[1] if len(fits) > 1 else epochs.first, epochs.settled)
    warm = [float(r["time/compile"]) for r in timed if "time/compile" in r]
    warmup = statistics.mean(warm) if warm else 0.0
    return Pace(cfg, rates, epochs, early, warmup, at, float(timed[-1]["time"]))


def finish(busy: Sequence[float], queued: Sequence[float], procs: int) -> float:
    """Seconds until the last run ends: the running ones after ``busy`` seconds each, then
    each of ``queued`` in turn on the first of ``procs`` slots to come free."""
    slots = sorted([*busy, *[0.0] * max(procs - len(busy), 0)])
    for seconds in queued:
        heapq.heappush(slots, heapq.heappop(slots) + seconds)
    return max(slots, default=0.0)


@dataclass
class Outlook:
    """The campaign's time left, from its runs' folders (configs read once)."""

    steps: int  # the env steps every run goes to
    procs: int
    jobs: Sequence[Job] = ()  # the campaign's runs: those done lend their pace too
    _configs: dict[str, Config | None] = field(default_factory=dict)

    def paces(self, path: str) -> Pace | None:
        """The run's pace now (its config read once it has one), or None."""
        if path not in self._configs:
            try:
                self._configs[path] = run_config(path, self.steps)
            except (OSError, ValueError, OmegaConfBaseException, yaml.YAMLError):  # (not yet)
                self._configs[path] = None
        cfg, metrics = self._configs[path], os.path.join(path, "metrics.jsonl")
        if cfg is None or not os.path.isfile(metrics):
            if cfg is None:
                del self._configs[path]  # (read again next time: the run may have started)
            return None
        return pace(cfg, read_metrics(metrics))

    def seconds(
        self, running: Sequence[tuple[Sequence[Job], float]], waiting: Sequence[Sequence[Job]]
    ) -> float | None:
        """Seconds until every run is at :attr:`steps`, or None while a run (or, for a run
        not started yet, every run of its variant) has no estimate. ``running``: each
        process's jobs (:class:`~mbrl.tools.seed_runs.Job`) and when it started; ``waiting``:
        each process to come, in order."""
        now, busy, queued = time.time(), [], []
        jobs = [*self.jobs, *(j for u, _ in running for j in u), *(j for u in waiting for j in u)]
        known = {path: self.paces(path) for path in dict.fromkeys(j.path for j in jobs)}
        for unit, started in running:
            left = [_running_left(j, known, started, now) for j in unit]
            if None in left:
                return None
            busy.append(max(x for x in left if x is not None))
        for unit in waiting:
            left = [self._waiting_left(j, known) for j in unit]
            if None in left:
                return None
            queued.append(max(x for x in left if x is not None))
        return finish(busy, queued, self.procs)

    def _waiting_left(self, job: Job, known: dict[str, Pace | None]) -> float | None:
        """A run to come: from its checkpoint at its own pace where it ran before, else a
        whole run at its variant's."""
        own, steps = known[job.path], job.steps()
        if own is not None and steps:
            return own.left(steps) + own.warmup + START
        return _new_run(job.path, known)


def _running_left(
    job: Job, known: dict[str, Pace | None], started: float, now: float
) -> float | None:
    """A running process's run: from its last log row, less the time since; before the
    process has logged, from the step it resumed at, its start still to come; a new run
    before its own estimate is ready, as one of its variant's, less the time since its start."""
    p = known[job.path]
    if p is None:
        fresh = None if job.before else _new_run(job.path, known)  # (before: its start step)
        return None if fresh is None else max(fresh - (now - started), 0.0)
    if p.time >= started:
        return max(p.left(p.step) - (now - p.time), 0.0)
    # (its metrics may run past its checkpoint, from a process killed between the two)
    return max(p.left(job.before or p.step) + p.warmup + START - (now - started), 0.0)


def _new_run(path: str, known: dict[str, Pace | None]) -> float | None:
    """A new run's seconds at the mean pace of the runs of its variant that have one."""
    kin = [p for j, p in known.items() if p is not None and _variant(j) == _variant(path)]
    return statistics.mean(p.new_run() for p in kin) if kin else None


def _variant(path: str) -> str:
    """A run folder's variant: the folder above ``seed_<k>``."""
    return os.path.dirname(os.path.normpath(path))


def outlook_text(seconds: float | None, steps: int, deadline: float) -> str:
    """`` · every run at 50,000 in about 2 h 05 min (19:50)``, with the budget's end where
    it comes first; while there is none, that it is not known yet."""
    if seconds is None:  # (a run's estimate waits for log steps: every phase timed, 2 fits)
        return " · time left not known yet (each variant needs a run a few log steps in)"
    end = time.time() + seconds
    text = f" · every run at {steps:,} in about {duration(seconds)} ({_clock(end)})"
    if deadline < end:
        text += f"; the budget ends first, at {_clock(deadline)}"
    return text


def _clock(when: float) -> str:
    """``19:50``, or ``Tue 03:10`` from 20 hours ahead (where the hour alone is ambiguous)."""
    fmt = "%H:%M" if when - time.time() < 20 * 3600 else "%a %H:%M"
    return time.strftime(fmt, time.localtime(when))


def campaign(
    units: Sequence[Job | Batch], steps: int, procs: int, deadline: float, every: Sequence[Job]
) -> Callable[[list[tuple[list[Job], float]]], str]:
    """``scripts/seeds.py``'s outlook for :class:`~mbrl.tools.seed_runs.Pool`'s "running:"
    lines: the running processes' runs, then every other process of ``units`` that is short
    of ``steps`` and has not failed, in the order they start; ``every``: all the campaign's
    runs, this invocation's or not, whose paces a run to come may take."""
    outlook = Outlook(steps, procs, [*every, *(j for u in units for j in members(u))])

    def text(running: list[tuple[list[Job], float]]) -> str:
        busy = {id(j) for jobs, _ in running for j in jobs}
        waiting = [
            members(u)
            for u in units
            if not any(id(j) in busy or j.outcome.startswith("failed") for j in members(u))
            and u.steps() < steps
        ]
        return outlook_text(outlook.seconds(running, waiting), steps, deadline)

    return text
