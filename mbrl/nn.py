"""Network building blocks: plain MLPs here; batched ensembles come from ``flows.nn``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from flows.nn import EnsembleLinear, EnsembleMLP

__all__ = ["EnsembleLinear", "EnsembleMLP", "adam", "mlp"]


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, act: type[nn.Module] = nn.ReLU
) -> nn.Sequential:
    """``in -> hidden... -> out`` with ``act`` between layers and a linear output."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), act()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


def adam(
    params: Iterable[nn.Parameter] | Iterable[torch.Tensor] | list[dict[str, Any]],
    lr: float,
    weight_decay: float = 0.0,
    decoupled: bool = False,
) -> torch.optim.Optimizer:
    """Adam (or AdamW with ``decoupled``) with the fused implementation where torch has one.

    Measured side by side on the 2-core CPU (SAC update, batch 256, 256x256): 13.6 ms with
    torch's default per-tensor Adam, 11.1-11.7 ms fused.
    """
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    params = list(params)  # type: ignore[assignment]
    try:
        return cls(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        return cls(params, lr=lr, weight_decay=weight_decay)
