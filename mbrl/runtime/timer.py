"""Per-phase wall-clock timers: where does each second of the loop go?

Cheap enough to run always. On a CPU: one ``perf_counter`` pair per phase. On CUDA a phase
boundary records a CUDA event instead of waiting for the device (a sync there would stop the
host from stepping the env while the GPU runs the queued updates): a phase's time is the span
between its two events on the GPU's stream, read once per log interval. Time the GPU spends on
queued work while the host moves on is billed to the phase that queued it; a phase with no GPU
work (the env step) counts only where the GPU waits for it.

Every checkpoint saves the open log interval's seconds (:meth:`PhaseTimer.state_dict`); the
process that resumes from it adds them to its first log line, which says so in
:data:`CARRIED`. A run stopped between two log lines (Ctrl-C, ``max_minutes``) so loses none of
its loop's time; the tools that tell one process's intervals from another's (the time-left
check, seeds.py's rates) read a resume from that key.

Time the process stood stopped (Ctrl-Z, ``kill -STOP``: :mod:`mbrl.clock`) counts in no
phase and not in ``time/wall``; ``time/paused`` says how much there was in a log interval.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from mbrl.clock import clock, paused

# a log line's seconds run by the process before a resume (only on its first line after one)
CARRIED = "process/carried_seconds"


def resumed_between(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether metrics line ``b`` is the first of a process other than the one that wrote the
    line before it, ``a``. A resume says so (:data:`CARRIED`); in runs from before that key,
    the stamps' gap, less ``b``'s ``time/paused``, is longer than ``b``'s ``time/wall`` (the
    stopped process's last seconds were written nowhere; 5 % + 5 s of slack for the logging
    between two stamps)."""
    if CARRIED in b:
        return True
    gap = b["time"] - a["time"] - b.get("time/paused", 0.0)
    return bool(gap > b["time/wall"] * 1.05 + 5.0)


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._totals: dict[str, float] = {}  # seconds since the last metrics(), per phase
        self._grand: dict[str, float] = {}  # seconds since construction, per phase
        # (a CUDA phase's events, and the seconds the process stood stopped between them)
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event, float]] = []
        self._start = self.created = clock()
        self._paused = self._paused_at_start = paused()  # (at the last metrics(); at creation)
        self._carried: float | None = None  # seconds an earlier process ran of this interval

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            stopped = paused()
            try:
                yield
            finally:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self._pending.append((name, start, end, paused() - stopped))
                if len(self._pending) > 4096:  # a long log interval: read the finished ones
                    self._resolve(wait=False)
            return
        t0 = clock()
        try:
            yield
        finally:
            self._add(name, clock() - t0)

    def _add(self, name: str, seconds: float) -> None:
        self._totals[name] = self._totals.get(name, 0.0) + seconds
        self._grand[name] = self._grand.get(name, 0.0) + seconds

    def _resolve(self, wait: bool = True) -> None:
        """Read the CUDA events recorded since the last call: all of them (waiting for the
        last), or with ``wait=False`` those the GPU has reached."""
        if wait and self._pending:
            self._pending[-1][2].synchronize()  # sync-ok: once per log interval or checkpoint
        done = 0
        for name, start, end, stopped in self._pending:
            if not (wait or end.query()):
                break
            self._add(name, max(start.elapsed_time(end) / 1000.0 - stopped, 0.0))
            done += 1
        del self._pending[:done]

    @property
    def grand(self) -> dict[str, float]:
        """Seconds per phase since the timer was created."""
        self._resolve()
        return self._grand

    def wall(self) -> float:
        """Seconds since the timer was created, less any time the process stood stopped."""
        return clock() - self.created

    def stopped(self) -> float:
        """Seconds the process stood stopped since the timer was created."""
        return paused() - self._paused_at_start

    def state_dict(self) -> dict[str, Any]:
        """The open log interval: seconds per phase, wall and stopped seconds so far."""
        self._resolve()
        return {
            "phases": dict(self._totals),
            "wall": clock() - self._start,
            "paused": paused() - self._paused,
        }

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Add an earlier process's open interval (:meth:`state_dict`; None: a checkpoint from
        before it was saved) to this one's, so that the next log line holds both. The
        seconds since creation (``grand``, the estimate's rates) stay this process's."""
        self._carried = 0.0 if state is None else float(state["wall"])
        if state is None:
            return
        for name, seconds in state["phases"].items():
            self._totals[name] = self._totals.get(name, 0.0) + float(seconds)
        self._start -= float(state["wall"])
        self._paused -= float(state["paused"])

    def metrics(self) -> dict[str, float]:
        """``time/<phase>`` seconds and ``time/other`` since the last call, ``time/wall`` (their
        sum) and, if the process stood stopped meanwhile, ``time/paused`` (after a resume,
        :data:`CARRIED`); then reset."""
        self._resolve()
        wall = clock() - self._start
        out = {f"time/{k}": v for k, v in self._totals.items()}
        out["time/other"] = max(wall - sum(self._totals.values()), 0.0)
        out["time/wall"] = wall
        stopped = paused() - self._paused
        if stopped > 0:
            out["time/paused"] = stopped
        if self._carried is not None:  # (the first line after a resume)
            out[CARRIED], self._carried = self._carried, None
        self._totals = {}
        self._start, self._paused = clock(), paused()
        return out
