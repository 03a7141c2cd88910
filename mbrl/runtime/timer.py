"""Per-phase wall-clock timers: where does each second of the loop go?

Cheap enough to run always: one ``perf_counter`` pair per phase, plus a device sync at the
phase boundary on CUDA (otherwise queued kernels would be billed to whichever phase syncs next).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class PhaseTimer:
    def __init__(self, device: torch.device) -> None:
        self._sync = device.type == "cuda"
        self.totals: dict[str, float] = {}  # seconds since the last reset, per phase
        self.grand: dict[str, float] = {}  # seconds since construction, per phase
        self._start = self.created = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self._sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            if self._sync:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            self.totals[name] = self.totals.get(name, 0.0) + dt
            self.grand[name] = self.grand.get(name, 0.0) + dt

    def wall(self) -> float:
        """Seconds since the timer was created."""
        return time.perf_counter() - self.created

    def metrics(self) -> dict[str, float]:
        """``time/<phase>`` seconds and ``time/other`` since the last call; then reset."""
        wall = time.perf_counter() - self._start
        out = {f"time/{k}": v for k, v in self.totals.items()}
        out["time/other"] = max(wall - sum(self.totals.values()), 0.0)
        out["time/wall"] = wall
        self.totals = {}
        self._start = time.perf_counter()
        return out
