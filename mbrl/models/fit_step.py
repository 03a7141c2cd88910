"""One optimizer step of the model fit on a minibatch of fixed shape.

Every minibatch of an epoch has ``batch_size`` rows per member: the last, partial one is padded
with rows of weight 0 (:func:`minibatches`), so it trains on bnn.py's rows with bnn.py's mean,
and the step has one shape for the whole run: compiled (``compile``) it is one compiled graph,
on CUDA (``graphs``) one CUDA graph replay, after the rows are copied into its fixed inputs
(a capture that fails: ``mbrl.compiled.GraphedStep``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from mbrl.compiled import Compiled, GraphedStep, what_ran
from mbrl.models.dynamics import DynamicsModel
from mbrl.optim import GuardedStep


def minibatches(order: Tensor, batch_size: int, steps: int) -> tuple[Tensor, Tensor]:
    """``order`` [E, n] (each member's rows in epoch order) as ``steps`` minibatches of
    ``batch_size`` rows: (row indices, weights), each [steps, E, b]. Rows past n pad the last
    minibatch with weight 0 (they index row ``order[:, 0]``): bnn.py's last batch is the
    partial one, averaged over its own rows."""
    e, n = order.shape
    total = steps * batch_size
    weight = torch.ones(e, total, device=order.device)
    if total > n:
        weight[:, n:] = 0.0
        order = torch.cat([order, order[:, :1].expand(e, total - n)], dim=1)
    split = (e, steps, batch_size)
    idx = order[:, :total].reshape(split).transpose(0, 1)
    return idx, weight.view(split).transpose(0, 1).contiguous()  # (one layout: one graph)


@dataclass
class FitProgress:
    """A model fit between two epochs: everything a stopped fit needs to go on exactly as an
    uninterrupted one (with the model's weights, normalisers and optimizer state, which the
    checkpoint holds anyway). ``best``/``snapshot``: each member's best holdout score and the
    per-member parameters of its best epoch."""

    train_idx: Tensor
    hold_idx: Tensor
    boot: Tensor  # [E, n_train] each member's bootstrap resample of the training rows
    dropped: int  # rows left out for a non-finite value
    epoch: int = 0
    stale: int = 0  # epochs since a member last improved
    seconds: float = 0.0  # time spent so far (model.max_seconds)
    train_loss: Tensor = field(default_factory=lambda: torch.zeros(()))
    best: Tensor | None = None
    snapshot: list[Tensor] = field(default_factory=list)

    def state_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_state(cls, state: dict[str, Any], device: torch.device) -> FitProgress:
        moved: dict[str, Any] = {}
        for key, value in state.items():
            if key == "snapshot":
                moved[key] = [t.to(device) for t in value]
            else:
                moved[key] = value.to(device) if isinstance(value, Tensor) else value
        return cls(**moved)


class FitStep:
    """``step(x, y, idx, weight)``: one guarded optimizer step of ``model`` on rows ``idx``
    [E, b] of ``x``, ``y`` with row weights [E, b]; returns the mean per-member train metric
    [()] (a device tensor)."""

    def __init__(
        self,
        model: DynamicsModel,
        guarded: GuardedStep,
        autocast: Callable[[], AbstractContextManager[Any]],
        compile: bool = False,
        graphs: bool = False,
    ) -> None:
        self.model, self.guarded, self.autocast, self.graphs = model, guarded, autocast, graphs
        # (The class's function, so that a copy of the step runs the same compiled code.)
        self.compiled = Compiled(type(self).loss, "the model fit") if compile else None
        self._graphed: GraphedStep[Tensor] | None = None
        self._inputs: dict[str, Tensor] = {}  # a graphed step's fixed inputs

    def __call__(self, x: Tensor, y: Tensor, idx: Tensor, weight: Tensor) -> Tensor:
        if not self.graphs:
            return self.train(x[idx], y[idx], weight)
        if self._graphed is None:
            s = self._inputs = {"x": x[idx], "y": y[idx], "w": weight.clone()}
            self._graphed = GraphedStep(
                lambda: self.train(s["x"], s["y"], s["w"]), [], self.model.device, "the fit step"
            )
        s = self._inputs
        torch.index_select(x, 0, idx.flatten(), out=s["x"].view(-1, x.shape[-1]))
        torch.index_select(y, 0, idx.flatten(), out=s["y"].view(-1, y.shape[-1]))
        s["w"].copy_(weight)
        return self._graphed()

    def train(self, xb: Tensor, yb: Tensor, weight: Tensor) -> Tensor:
        """The step on gathered rows ``xb`` [E, b, C], ``yb`` [E, b, D]."""
        loss, metric = (
            self.loss(xb, yb, weight)
            if self.compiled is None
            else self.compiled(self, xb, yb, weight)
        )
        self.guarded(loss)
        return metric.detach().mean()

    def loss(self, xb: Tensor, yb: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
        """The model's loss on one minibatch and its per-member term [E]."""
        with self.autocast():
            return self.model.loss(xb, yb, weight)

    def reset(self) -> None:
        """Forget the CUDA graph (capture again): the optimizer's state was replaced. A
        capture that failed is not tried again."""
        if self._graphed is not None and self._graphed.failure is None:
            self._graphed = None

    @property
    def ran(self) -> str:
        """What the steps ran: ``eager``, ``compiled`` or ``eager (compile failed: ...)``, and
        with ``graphs`` ``graphed``, ``not captured yet`` or ``uncaptured (capture failed:
        ...)``."""
        return what_ran(self.compiled, self.graphs, self._graphed)

    @property
    def replays(self) -> int:
        """Steps served by a replay of the current CUDA graph."""
        return 0 if self._graphed is None else self._graphed.replays

    def warm_up(self, members: int, batch_size: int) -> Compiled | None:
        """Compile now, on a copy of the model, its optimizer and random rows (the model
        itself is left as it was). Returns the :class:`Compiled`, or None when not compiling."""
        if self.compiled is None:
            return None
        twin = copy.deepcopy(self)  # (its compiled loss is this step's)
        twin.graphs, twin._graphed = False, None
        m, shape = self.model, (members, batch_size)
        x, y = torch.randn(*shape, m.context_dim), torch.randn(*shape, m.target_dim)
        w = torch.ones(shape, device=m.device)
        self.compiled.warm_up(lambda: twin.train(x.to(m.device), y.to(m.device), w))
        return self.compiled
