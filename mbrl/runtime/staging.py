"""Host-to-device staging for the env loop: one packed row per env step, one copy.

A transition's fields are written into a row of a preallocated host tensor (pinned when the
buffer lives on a GPU) and reach the device in a single ``non_blocking`` copy, instead of one
small blocking copy per field. Rows are used round-robin; a row is rewritten only after its
last copy has finished (a CUDA event, rarely waited on).
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
    ) -> None:
        """``shapes``: each field's per-row shape (as a buffer's ``[capacity, *shape]`` fields).
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
        self.host = torch.zeros(rows, start, pin_memory=self.pinned)
        self._np = self.host.numpy()
        self._events: list[torch.cuda.Event | None] = [None] * rows
        self._next = 0

    def stage(self, values: Mapping[str, np.ndarray | float | bool]) -> dict[str, Tensor]:
        """Pack ``values`` (field -> host value) into one row; returns [1, *shape] device views,
        ready for ``ReplayBuffer.add``."""
        k = self._next
        self._next = (k + 1) % self.host.shape[0]
        event = self._events[k]
        if event is not None:
            event.synchronize()  # the row's previous copy must have left before it is rewritten
        row = self._np[k]
        for name, sl in self.slices.items():
            row[sl] = values[name]
        packed = self.host[k : k + 1]
        if self.pinned:
            packed = packed.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self._events[k] = event
        elif self.cuda:
            packed = packed.to(self.device)
        return {name: packed[:, sl].view(1, *self.shapes[name]) for name, sl in self.slices.items()}
