"""Network building blocks: plain MLPs and ensembles evaluated as one batched module."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


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


class EnsembleLinear(nn.Module):
    """E independent linear layers applied as one batched matmul.

    x: [E, B, in] -> [E, B, out]. Initialised like ``nn.Linear`` for each member.
    """

    def __init__(self, members: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.members, self.in_dim, self.out_dim = members, in_dim, out_dim
        self.weight = nn.Parameter(torch.empty(members, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(members, 1, out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_dim)
        # Same distribution as nn.Linear's default (kaiming_uniform with a=sqrt(5)).
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return torch.baddbmm(self.bias, x, self.weight)

    def extra_repr(self) -> str:
        return f"members={self.members}, in_dim={self.in_dim}, out_dim={self.out_dim}"


def ensemble_mlp(
    members: int,
    in_dim: int,
    hidden: Sequence[int],
    out_dim: int,
    act: type[nn.Module] = nn.ReLU,
) -> nn.Sequential:
    """An MLP per member, all members in one module: [E, B, in] -> [E, B, out]."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [EnsembleLinear(members, last, width), act()]
        last = width
    layers.append(EnsembleLinear(members, last, out_dim))
    return nn.Sequential(*layers)
