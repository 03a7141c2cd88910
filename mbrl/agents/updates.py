"""The G SAC updates that follow an env step, as one function.

``SACUpdates(n)`` runs n updates, each on a batch drawn from the buffers, and returns the last
one's metrics (device tensors). How it runs:

- eager, or with the agent's losses compiled (``compile``): a Python loop over the updates;
- on CUDA with ``graphs``: the whole block (sampling, losses, backward, Adam step, target
  update, n times) is one CUDA graph, captured at its first calls and then replayed once per
  env step: no Python and no kernel launches on the host, and no host sync inside.

A block is captured per batch layout (``data.batch_layout()``: e.g. real rows only until the
model pool has rows, mixed afterwards): a new layout gets its own capture.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

import torch
from torch import Tensor

from mbrl.agents.sac import SAC
from mbrl.compiled import GraphedStep


class BatchSource(Protocol):
    """Where SAC's batches come from (``mbrl.mbpo.MBPO`` / ``ModelFree``)."""

    def batch(self, batch_size: int, gen: torch.Generator) -> dict[str, Tensor]: ...

    def batch_layout(self) -> Hashable: ...  # which buffers a batch is drawn from now


class SACUpdates:
    def __init__(
        self,
        agent: SAC,
        data: BatchSource,
        batch_size: int,
        generator: torch.Generator,
        graphs: bool = False,
    ) -> None:
        """``graphs``: capture the block as a CUDA graph (CUDA only)."""
        if graphs and agent.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, not {agent.device}")
        self.agent, self.data, self.batch_size, self.gen = agent, data, batch_size, generator
        self.graphs = graphs
        self._graphed: dict[Hashable, GraphedStep[dict[str, Tensor]]] = {}

    def __call__(self, n: int) -> dict[str, Tensor]:
        """``n`` updates; the last one's metrics."""
        if not self.graphs:
            return self.block(n)
        key = (n, self.data.batch_layout())
        if key not in self._graphed:
            self._graphed[key] = GraphedStep(lambda: self.block(n), [self.gen])
        return self._graphed[key]()

    def block(self, n: int) -> dict[str, Tensor]:
        """The updates themselves: sample a batch, update; n times."""
        metrics: dict[str, Tensor] = {}
        for _ in range(n):
            metrics = self.agent.update(self.data.batch(self.batch_size, self.gen), self.gen)
        return metrics
