"""Per-phase wall-clock timers: where does each second of the loop go?

Cheap enough to run always. On a CPU: one ``perf_counter`` pair per phase. On CUDA a phase
boundary records a CUDA event instead of waiting for the device (a sync there would stop the
host from stepping the env while the GPU runs the queued updates): a phase's time is the span
between its two events on the GPU's stream, read once per log interval. Time the GPU spends on
queued work while the host moves on is billed to the phase that queued it; a phase with no GPU
work (the env step) counts only where the GPU waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._totals: dict[str, float] = {}  # seconds since the last metrics(), per phase
        self._grand: dict[str, float] = {}  # seconds since construction, per phase
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._start = self.created = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                yield
            finally:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                self._pending.append((name, start, end))
                if len(self._pending) > 4096:  # a long log interval: read the finished ones
                    self._resolve(wait=False)
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._add(name, time.perf_counter() - t0)

    def _add(self, name: str, seconds: float) -> None:
        self._totals[name] = self._totals.get(name, 0.0) + seconds
        self._grand[name] = self._grand.get(name, 0.0) + seconds

    def _resolve(self, wait: bool = True) -> None:
        """Read the CUDA events recorded since the last call: all of them (waiting for the
        last), or with ``wait=False`` those the GPU has reached."""
        if wait and self._pending:
            self._pending[-1][2].synchronize()  # sync-ok: once per log interval
        done = 0
        for name, start, end in self._pending:
            if not (wait or end.query()):
                break
            self._add(name, start.elapsed_time(end) / 1000.0)
            done += 1
        del self._pending[:done]

    @property
    def grand(self) -> dict[str, float]:
        """Seconds per phase since the timer was created."""
        self._resolve()
        return self._grand

    def wall(self) -> float:
        """Seconds since the timer was created."""
        return time.perf_counter() - self.created

    def metrics(self) -> dict[str, float]:
        """``time/<phase>`` seconds and ``time/other`` since the last call; then reset."""
        self._resolve()
        wall = time.perf_counter() - self._start
        out = {f"time/{k}": v for k, v in self._totals.items()}
        out["time/other"] = max(wall - sum(self._totals.values()), 0.0)
        out["time/wall"] = wall
        self._totals = {}
        self._start = time.perf_counter()
        return out
