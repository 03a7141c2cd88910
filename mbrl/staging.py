"""Host-to-device staging for the env loop: one packed slot per (vector) env step, one copy.

The transitions of a step (one per env copy) are written into a slot of a preallocated host
tensor (pinned when the buffer lives on a GPU) and reach the device in a single
``non_blocking`` copy, instead of one small blocking copy per field. Slots are used
round-robin; a slot is rewritten only after its last copy has finished (a CUDA event, rarely
waited on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor


class HostStager:
    def __init__(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        device: torch.device,
        rows: int = 64,
        pinned: bool = True,
        batch: int = 1,
    ) -> None:
        """``shapes``: each field's per-row shape (as a buffer's ``[capacity, *shape]`` fields);
        ``rows``: slots; ``batch``: transitions per slot (the env copies).
        ``pinned=False`` (benchmarks only): pageable host rows, blocking copies."""
        self.device = device
        self.cuda = device.type == "cuda"
        self.pinned = pinned and self.cuda
        self.shapes = dict(shapes)
        self.slices: dict[str, slice] = {}
        start = 0
        for name, shape in self.shapes.items():
            self.slices[name] = slice(start, start + math.prod(shape))
            start += math.prod(shape)
        self.batch = batch
        self.host = torch.zeros(rows, batch, start, pin_memory=self.pinned)
        self._np = self.host.numpy()
        self._events: list[torch.cuda.Event | None] = [None] * rows
        self._next = 0

    def stage(self, values: Mapping[str, np.ndarray | float | bool]) -> dict[str, Tensor]:
        """Pack ``values`` (field -> host values, ``batch`` of them; a scalar when ``batch`` is 1)
        into one slot; returns ``[batch, *shape]`` device views, ready for ``ReplayBuffer.add``."""
        k = self._next
        self._next = (k + 1) % self.host.shape[0]
        event = self._events[k]
        if event is not None:
            event.synchronize()  # the row's previous copy must have left before it is rewritten
        self.pack(values, out=self._np[k])
        packed = self.host[k]
        if self.pinned:
            packed = packed.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self._events[k] = event
        elif self.cuda:
            packed = packed.to(self.device)
        return self.unpack(packed)

    def pack(
        self, values: Mapping[str, np.ndarray | float | bool], out: np.ndarray | None = None
    ) -> np.ndarray:
        """``values`` (``batch`` transitions) as packed host rows [batch, width] (float32)."""
        if out is None:
            out = np.empty((self.batch, self.host.shape[-1]), dtype=np.float32)
        for name, sl in self.slices.items():
            out[:, sl] = np.reshape(values[name], (self.batch, -1))
        return out

    def unpack(self, packed: Tensor) -> dict[str, Tensor]:
        """Packed rows [n, width] -> ``[n, *shape]`` views per field."""
        n = packed.shape[0]
        return {name: packed[:, sl].view(n, *self.shapes[name]) for name, sl in self.slices.items()}

    def rows_to_device(self, rows: np.ndarray) -> dict[str, Tensor]:
        """Packed host rows [n, width] (e.g. a finished episode's) on the buffer's device."""
        return self.unpack(torch.from_numpy(rows).to(self.device))
