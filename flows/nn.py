"""Batched ensemble layers: E members in one module, a leading member dimension everywhere."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import torch
from torch import Tensor, nn


def fp32(x: Tensor) -> contextlib.AbstractContextManager[Any]:
    """Autocast off while it is on for ``x``'s device, so that an output layer fed by AMP
    hidden layers computes in fp32 (give it ``full(x)``); outside autocast a no-op."""
    if not torch.is_autocast_enabled(x.device.type):
        return contextlib.nullcontext()
    return torch.autocast(x.device.type, enabled=False)


def full(x: Tensor) -> Tensor:
    """At least fp32: half-precision activations are promoted, float64 stays float64."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


class _ReLUFromOutput(torch.autograd.Function):
    """relu(x), with the derivative read from the output: d relu(x) / dx = sign(relu(x))."""

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return torch.relu(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor], output: Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * out.sign()  # 1 where x > 0, else 0


class ReLU(nn.Module):
    """``nn.ReLU`` whose backward reads its (float) output instead of a boolean mask.

    The same function and gradient, written for the compiler: torch's ReLU backward is
    ``where(out <= 0, 0, grad)``, and a compiled backward then stores the comparison as a
    boolean tensor, which inductor's CPU kernels write ~40x slower than a float one
    (docs/benchmarks.md). Multiplying by ``sign(out)`` keeps the float activation that the
    next layer's weight gradient stores anyway. Run eagerly it is ``torch.relu`` itself;
    compiled, gradients equal ``nn.ReLU``'s (tested). ``from_output = False`` makes it
    ``torch.relu`` compiled too: under ``torch.func.vmap`` (batched seeds), which a compiled
    custom autograd function cannot run under.
    """

    from_output = True

    def forward(self, x: Tensor) -> Tensor:
        if not (self.from_output and torch.compiler.is_compiling()):
            return torch.relu(x)  # eager: torch's own kernels are the faster ones
        out: Tensor = _ReLUFromOutput.apply(x)
        return out


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
        # bmm, then the bias: compiled, the addition fuses into the next elementwise pass,
        # where baddbmm would first copy the broadcast bias into its output (docs/benchmarks.md).
        out = torch.bmm(x, w)
        return out + b.to(out.dtype)  # (under autocast: the bmm's dtype, as baddbmm's)

    def extra_repr(self) -> str:
        return f"members={self.members}, in_dim={self.in_dim}, out_dim={self.out_dim}"


class EnsembleMLP(nn.Module):
    """One MLP per member: [E', B, in] -> [E', B, out], activation between layers.

    Under autocast the hidden layers run in the AMP dtype and the output layer in fp32: the
    outputs are a model's numbers (spline knots, means, log-variances), not features."""

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
        for layer in self.layers[:-1]:
            x = self.act(layer(x, members))
        with fp32(x):
            return self.last(full(x), members)

    @property
    def last(self) -> EnsembleLinear:
        layer = self.layers[-1]
        assert isinstance(layer, EnsembleLinear)
        return layer
