"""The G SAC updates that follow an env step, as one function.

``SACUpdates(n)`` runs n updates, each on a batch drawn from the buffers, and returns the last
one's metrics (device tensors). How it runs:

- eager, or with the agent's losses compiled (``compile``): a Python loop over the updates;
- on CUDA with ``graphs``: the whole block (sampling, losses, backward, Adam step, target
  update, n times) is one CUDA graph, captured at its first calls and then replayed once per
  env step: no Python and no kernel launches on the host, and no host sync inside.

A block is captured per batch layout (``data.batch_layout()``: e.g. real rows only until the
model pool has rows, mixed afterwards): a new layout gets its own capture. Once a capture has
failed (``mbrl.compiled.fall_back``: strict mode raises), every block runs uncaptured.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl.agents.sac import SAC
from mbrl.compiled import GraphedStep, tf32_matmuls


class BatchSource(Protocol):
    """Where SAC's batches come from (``mbrl.model_side``: ``ModelSide`` / ``ModelFree``)."""

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
        tf32: bool = False,
    ) -> None:
        """``graphs``: capture the block as a CUDA graph (a capture off CUDA fails, as any
        failed capture: strict mode raises, otherwise the block runs uncaptured). ``tf32``:
        its fp32 matmuls on TF32 tensor cores (CUDA; ``mbrl.compiled.tf32_matmuls``), to
        which the agent's compile warm-up must be set alike (or the update compiles again)."""
        self.agent, self.data, self.batch_size, self.gen = agent, data, batch_size, generator
        self.graphs, self.tf32 = graphs, tf32
        self.generators = [generator]  # what the block draws from (a CUDA graph registers them)
        self._graphed: dict[Hashable, GraphedStep[dict[str, Tensor]]] = {}

    def __call__(self, n: int) -> dict[str, Tensor]:
        """``n`` updates; the last one's metrics."""
        with tf32_matmuls(self.tf32):
            if not self.graphs or any(g.failure for g in self._graphed.values()):
                return self.block(n)
            key = (n, self.batch_layout())
            if key not in self._graphed:
                self._graphed[key] = GraphedStep(
                    lambda: self.block(n),
                    self.generators,
                    self.agent.device,
                    "the SAC update block",
                )
            return self._graphed[key]()

    def batch_layout(self) -> Hashable:
        """Which buffers the block's batches come from now (a capture per layout)."""
        return self.data.batch_layout()

    @property
    def ran(self) -> str:
        """What the blocks ran: the update ``eager``, ``compiled`` or ``eager (compile failed:
        ...)``, and with ``graphs`` how the block ran as a CUDA graph (``graphed``, ``not
        captured yet``, ``uncaptured (capture failed: ...)``)."""
        compiled = self.agent.compiled
        ran = "eager" if compiled is None else compiled.ran
        if self.graphs:
            ran += f", {graphs_ran(self._graphed.values())}"
        return ran

    @property
    def replays(self) -> int:
        """Blocks served by a CUDA graph replay so far."""
        return sum(g.replays for g in self._graphed.values())

    def block(self, n: int) -> dict[str, Tensor]:
        """The updates themselves: sample a batch, update; n times."""
        metrics: dict[str, Tensor] = {}
        for _ in range(n):
            metrics = self.agent.update(self.data.batch(self.batch_size, self.gen), self.gen)
        return metrics


def graphs_ran(steps: Iterable[GraphedStep[Any]]) -> str:
    """How a set of graphed steps ran: the first failure, else ``graphed`` once all are
    captured, else ``not captured yet``."""
    states = [g.ran for g in steps]
    failed = [s for s in states if s.startswith("uncaptured")]
    if failed:
        return failed[0]
    return "graphed" if states and all(s == "graphed" for s in states) else "not captured yet"
