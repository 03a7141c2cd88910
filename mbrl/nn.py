"""Network building blocks: plain MLPs here; batched ensembles come from ``flows.nn``."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from flows.nn import EnsembleLinear, EnsembleMLP, fp32, full

__all__ = ["EnsembleLinear", "EnsembleMLP", "fp32", "full", "mlp"]


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
