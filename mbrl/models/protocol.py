"""What a world model is to FlowMBPO: the methods the model fit, the rollouts and the rewarder
call (:class:`WorldModel`), and nothing more.

A model is an ensemble of E members that predicts the targets [s' - s, r] from normalised
inputs (s, a), in the model's units (targets standardised when ``model.normalize_targets``).
It is one ``nn.Module`` class, built as ``cls(dim, context_dim, cfg)``, with its config (a
:class:`~mbrl.config.ModelConfig` subclass, the class attribute ``config``), registered with
:func:`mbrl.models.register_model` (``mbrl/models/model_registry.py``). Nothing outside a model's
own file knows which model it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol

import torch
from torch import Tensor

# Holdout-score functions get this: model-unit targets -> raw target units.
ToRaw = Callable[[Tensor], Tensor]


class WorldModel(Protocol):
    """The methods a model provides. ``x`` holds normalised inputs, [B, C] (shared by the
    members) or [E', B, C]; ``y`` targets in model units, [E', B, D] or [B, D]."""

    # The holdout scores :meth:`score` computes (``model.select_by`` picks one of them);
    # "nll" is taken to be a negative log-likelihood (logged in raw target units).
    scores: ClassVar[tuple[str, ...]]
    # The names of its parameters that have no leading member dimension (one value for all
    # members, as MBPO's shared log-variance bounds), usually none: (). Every other
    # parameter is [E, ...]; the fit keeps each member's best epoch of those, and leaves
    # the shared ones at their last value (bnn.py's _save_state / _set_state).
    shared: ClassVar[tuple[str, ...]]

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
        """The training loss on a minibatch ``x`` [E, b, C], ``y`` [E, b, D], and a
        per-member train metric [E]; ``weight`` [E, b]: 1 for a row, 0 for padding (means
        over the rows of weight 1), or None (all rows)."""
        ...

    def score(self, name: str, x: Tensor, y: Tensor, raw: ToRaw) -> Tensor:
        """Holdout score ``name`` per member and row [E, B] (lower is better)."""
        ...

    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        """Next-step targets for rollouts: member ``members[i]`` on ``x[i]`` [E', B, C] ->
        [E', B, D] (a draw for a stochastic model, the prediction for a deterministic one)."""
        ...
