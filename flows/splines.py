"""Rational-quadratic splines (Durkan et al. 2019) with linear tails, sync-free.

Parameter layout and math are nflows' (``unconstrained_rational_quadratic_spline``): per
transformed dimension ``K`` width logits, ``K`` height logits and ``K - 1`` interior derivative
logits; outside ``[-B, B]`` the map is the identity. Two things differ, both for speed and
robustness, not for the result:

* The tails are handled with ``clamp`` + ``where`` instead of boolean-mask indexing (which
  makes shapes data-dependent and forces a device->host sync on CUDA).
* On the CPU the forward (density) direction calls nflows' ``rational_quadratic_spline`` itself.
  On CUDA, inside ``torch.compile`` and inside ``torch.func`` transforms (batched seeds' fits),
  it calls :func:`rq_forward`, the same formula without nflows' host-side domain check (a sync
  per call, a graph break for the compiler, data-dependent control flow for ``vmap``). The
  inverse (sampling) direction always uses :func:`rq_inverse`: nflows' ``assert
  (discriminant >= 0).all()`` is both a sync and a crash on the rare row where fp32 rounding
  makes the discriminant slightly negative; here it is clamped at zero.

Both ports are tested against nflows (``tests/test_splines.py``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from nflows.transforms.splines.rational_quadratic import (
    DEFAULT_MIN_BIN_HEIGHT,
    DEFAULT_MIN_BIN_WIDTH,
    DEFAULT_MIN_DERIVATIVE,
    rational_quadratic_spline,
)
from torch import Tensor

# Tail derivative logit such that min_derivative + softplus(c) = 1 (nflows' constant).
TAIL_DERIVATIVE_LOGIT = math.log(math.expm1(1.0 - DEFAULT_MIN_DERIVATIVE))


def params_per_dim(bins: int) -> int:
    """Conditioner outputs per transformed dimension: K widths, K heights, K - 1 derivatives."""
    return 3 * bins - 1


def _softmax(logits: Tensor) -> Tensor:
    """Softmax over a short last dim, written out: faster on a CPU than ``F.softmax``, whose
    kernel vectorises along the (here 8-long) last dim (docs/benchmarks.md)."""
    e = (logits - logits.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def _cumulative(logits: Tensor, min_size: float, bound: float) -> Tensor:
    """Knot positions [..., K+1] from bin logits [..., K], spanning exactly [-B, B]."""
    bins = logits.shape[-1]
    sizes = min_size + (1 - min_size * bins) * _softmax(logits)
    cum = F.pad(torch.cumsum(sizes, dim=-1), (1, 0)) * (2 * bound) - bound
    cum[..., 0], cum[..., -1] = -bound, bound  # exact ends despite rounding (as nflows)
    return cum


def _knots(w: Tensor, h: Tensor, d: Tensor, bound: float) -> tuple[Tensor, Tensor, Tensor]:
    """Cumulative widths and heights [..., K+1] and knot derivatives [..., K+1]."""
    cumw = _cumulative(w, DEFAULT_MIN_BIN_WIDTH, bound)
    cumh = _cumulative(h, DEFAULT_MIN_BIN_HEIGHT, bound)
    return cumw, cumh, DEFAULT_MIN_DERIVATIVE + F.softplus(d)


def _bin_of(
    v: Tensor, w: Tensor, h: Tensor, d: Tensor, bound: float, inverse: bool
) -> tuple[Tensor, ...]:
    """For each value, its bin's (x0, width, y0, height, slope, d0, d1); the bin is found
    among the input knots, or among the output knots when ``inverse``."""
    cumw, cumh, derivs = _knots(w, h, d, bound)
    knots = (cumh if inverse else cumw).clone()
    knots[..., -1] += 1e-6  # nflows' searchsorted: the last knot gets an epsilon
    # The bin holding v: the number of knots <= v, minus one (searchsorted over the last dim,
    # faster than summing a comparison; docs/benchmarks.md).
    idx = torch.searchsorted(knots, v[..., None].contiguous(), right=True) - 1
    # (NaN knots or values sort past the last knot: kept in range, they give NaN, not a crash)
    idx = idx.clamp(0, knots.shape[-1] - 2)

    def at(t: Tensor) -> Tensor:
        return t.gather(-1, idx)[..., 0]

    x0, bw = at(cumw), at(cumw.diff(dim=-1))
    y0, bh = at(cumh), at(cumh.diff(dim=-1))
    return x0, bw, y0, bh, bh / bw, at(derivs), at(derivs[..., 1:])


def rq_forward(x: Tensor, w: Tensor, h: Tensor, d: Tensor, bound: float) -> tuple[Tensor, Tensor]:
    """Spline on x in [-B, B] (d already padded to K+1): (y, log|dy/dx|), sync-free."""
    x0, bw, y0, bh, delta, d0, d1 = _bin_of(x, w, h, d, bound, inverse=False)
    theta = (x - x0) / bw
    t1t = theta * (1 - theta)
    denom = delta + (d0 + d1 - 2 * delta) * t1t
    y = y0 + bh * (delta * theta.square() + d0 * t1t) / denom
    num = delta.square() * (d1 * theta.square() + 2 * delta * t1t + d0 * (1 - theta).square())
    return y, torch.log(num) - 2 * torch.log(denom)


def rq_inverse(y: Tensor, w: Tensor, h: Tensor, d: Tensor, bound: float) -> tuple[Tensor, Tensor]:
    """Inverse spline on y in [-B, B]: (x, log|dx/dy|), sync-free, discriminant clamped >= 0."""
    x0, bw, y0, bh, delta, d0, d1 = _bin_of(y, w, h, d, bound, inverse=True)
    dy = y - y0
    s = d0 + d1 - 2 * delta
    a = dy * s + bh * (delta - d0)
    b = bh * d0 - dy * s
    c = -delta * dy
    disc = (b.square() - 4 * a * c).clamp_min(0.0)
    # theta lies in [0, 1] inside its bin; with extreme parameters fp32 cancellation can push
    # the root out (seen: a 0.007-high bin), which would make num negative and the log NaN.
    root = ((2 * c) / (-b - torch.sqrt(disc))).clamp(0.0, 1.0)
    t1t = root * (1 - root)
    denom = delta + s * t1t
    num = delta.square() * (d1 * root.square() + 2 * delta * t1t + d0 * (1 - root).square())
    return root * bw + x0, -(torch.log(num) - 2 * torch.log(denom))


def _transformed() -> bool:
    """Inside a ``torch.func`` transform (``vmap``, ``grad``): nflows' domain check reads a
    tensor's value, which a transform cannot."""
    return torch._C._functorch.peek_interpreter_stack() is not None


def rq_spline(
    x: Tensor, params: Tensor, bound: float, inverse: bool = False, use_nflows: bool | None = None
) -> tuple[Tensor, Tensor]:
    """Elementwise RQ spline with identity tails outside [-bound, bound].

    x: [...], params: [..., 3K - 1] (unnormalised, nflows layout). Returns (out, logabsdet),
    both shaped like x; logabsdet is of the map applied (forward, or inverse if ``inverse``).
    ``use_nflows`` picks the forward implementation (default: nflows on the CPU, when not
    being compiled nor inside a ``torch.func`` transform).
    """
    if use_nflows is None:
        use_nflows = x.device.type == "cpu" and not (
            torch.compiler.is_compiling() or _transformed()
        )
    bins = (params.shape[-1] + 1) // 3
    w, h, d = params[..., :bins], params[..., bins : 2 * bins], params[..., 2 * bins :]
    d = F.pad(d, (1, 1), value=TAIL_DERIVATIVE_LOGIT)
    inside = (x >= -bound) & (x <= bound)
    xc = x.clamp(-bound, bound)
    if inverse:
        out, logdet = rq_inverse(xc, w, h, d, bound)
    elif use_nflows:
        try:
            out, logdet = rational_quadratic_spline(
                xc, w, h, d, left=-bound, right=bound, bottom=-bound, top=bound
            )
        except (RuntimeError, IndexError):  # nflows indexes out of range on non-finite
            # values (a diverging fit): the same spline here gives NaN rows instead, for the
            # fit's own checks to act on (a test at every call would cost every fit time)
            out, logdet = rq_forward(xc, w, h, d, bound)
    else:
        out, logdet = rq_forward(xc, w, h, d, bound)
    return torch.where(inside, out, x), torch.where(inside, logdet, torch.zeros_like(logdet))
