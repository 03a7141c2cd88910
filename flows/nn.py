"""Batched ensemble layers: E members in one module, a leading member dimension everywhere."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor, nn


class EnsembleLinear(nn.Module):
    """E independent linear layers applied as one batched matmul.

    x: [E', B, in] -> [E', B, out], where E' = E, or len(members) when a subset of members
    is asked for. Initialised like ``nn.Linear`` for each member.
    """

    def __init__(self, members: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.members, self.in_dim, self.out_dim = members, in_dim, out_dim
        self.weight = nn.Parameter(torch.empty(members, in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(members, 1, out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's default init: kaiming_uniform(a=sqrt(5)) is U(-1/sqrt(in), 1/sqrt(in)).
        bound = 1.0 / math.sqrt(self.in_dim) if self.in_dim > 0 else 0.0
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        w: Tensor = self.weight
        b: Tensor = self.bias
        if members is not None:
            w, b = w[members], b[members]
        return torch.baddbmm(b, x, w)

    def extra_repr(self) -> str:
        return f"members={self.members}, in_dim={self.in_dim}, out_dim={self.out_dim}"


class EnsembleMLP(nn.Module):
    """One MLP per member: [E', B, in] -> [E', B, out], activation between layers."""

    def __init__(
        self,
        members: int,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int,
        act: type[nn.Module] = nn.SiLU,
    ) -> None:
        super().__init__()
        widths = [in_dim, *hidden, out_dim]
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b) for a, b in pairwise(widths))
        self.act = act()

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, members)
            if i < len(self.layers) - 1:
                x = self.act(x)
        return x

    @property
    def last(self) -> EnsembleLinear:
        layer = self.layers[-1]
        assert isinstance(layer, EnsembleLinear)
        return layer
