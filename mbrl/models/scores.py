"""Means and holdout scores that several models' :meth:`loss` and :meth:`score` share."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from mbrl.models.protocol import ToRaw


def weighted_mean(values: Tensor, weight: Tensor | None) -> Tensor:
    """Mean over dim 1 of ``values`` [E, b], over the rows of weight 1 (all rows: None)."""
    if weight is None:
        return values.mean(dim=1)
    return (values * weight).sum(dim=1) / weight.sum(dim=1)


def density_score(name: str, dist: Any, y: Tensor, raw: ToRaw) -> Tensor:
    """``nll`` (model units) or ``mse`` of the mode (raw units, mean over dims: bnn.py's
    ``mse_loss``) of a member distribution ``dist``, per member and row."""
    if name == "nll":
        out: Tensor = -dist.log_prob(y)
        return out
    return (raw(dist.mode.float()) - raw(y)).square().mean(-1)
