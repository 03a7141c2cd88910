"""Ensemble conditional normalizing flows: E members as one batched module.

A member is, from data ``y`` to noise ``z``::

    u = (y - loc(c)) * exp(-log_scale(c))          conditional elementwise affine
    for each layer: u = u[perm]; u_b = T(u_b; net([u_a, c]))   coupling (affine or RQ spline)
    z = u ~ N(0, I)

where ``c`` is an embedding of the context computed once per call. Coupling layers make both
directions one pass per layer: ``log_prob`` runs data -> noise, ``sample`` noise -> data.
Under autocast only the hidden layers of the context embedding and the conditioners run in
bf16/fp16; output layers, the base layer, transforms, log-determinants and losses run in fp32.
``flow(context)`` is a :class:`FlowDistribution` (as in zuko): ``.log_prob(y)``, ``.sample()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import Distribution, constraints

from flows.defaults import DEFAULTS, TRANSFORMS
from flows.nn import EnsembleLinear, EnsembleMLP, fp32
from flows.nn import full as _full
from flows.splines import TAIL_DERIVATIVE_LOGIT, params_per_dim, rq_spline

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _bounded(raw: Tensor, low: float, high: float) -> Tensor:
    """Squash ``raw`` into (low, high); ``raw = 0`` maps to exactly 0 (low < 0 < high)."""
    return low + (high - low) * torch.sigmoid(raw + math.log(-low / high))


class EnsembleConditionalFlow(nn.Module):
    """p(y | context) for E members at once; y: [..., dim], context: [..., context_dim]."""

    def __init__(
        self,
        members: int,
        dim: int,
        context_dim: int = 0,
        *,
        layers: int = DEFAULTS.layers,
        transform: str = DEFAULTS.transform,
        hidden: Sequence[int] = DEFAULTS.hidden,
        bins: int = DEFAULTS.bins,
        tail_bound: float = DEFAULTS.tail_bound,
        embed_hidden: Sequence[int] = DEFAULTS.embed_hidden,
        embed_dim: int = DEFAULTS.embed_dim,
        affine_clamp: float = 3.0,
        log_scale_bounds: tuple[float, float] = (-10.0, 2.0),
    ) -> None:
        super().__init__()
        if transform not in TRANSFORMS:
            raise ValueError(f"transform={transform!r} is not allowed; choose one of: {TRANSFORMS}")
        if not log_scale_bounds[0] < 0 < log_scale_bounds[1]:
            raise ValueError(f"log_scale_bounds={log_scale_bounds} must straddle 0")
        if members < 1 or dim < 1 or context_dim < 0 or layers < 0:
            raise ValueError(
                f"bad flow sizes: members={members}, dim={dim}, "
                f"context_dim={context_dim}, layers={layers}"
            )
        self.members, self.dim, self.context_dim = members, dim, context_dim
        self.transform, self.bins, self.tail_bound = transform, bins, tail_bound
        self.affine_clamp, self.log_scale_bounds = affine_clamp, log_scale_bounds
        self.split = dim // 2  # identity part of each coupling; the rest is transformed
        self.embed: EnsembleMLP | None = None
        feat = 0
        if context_dim > 0:
            self.embed = EnsembleMLP(members, context_dim, embed_hidden, embed_dim)
            feat = embed_dim
        self.base = EnsembleLinear(members, feat, 2 * dim)  # loc, log_scale of the affine layer
        per_dim = params_per_dim(bins) if transform == "spline" else 2
        self.conditioners = nn.ModuleList(
            EnsembleMLP(members, self.split + feat, hidden, (dim - self.split) * per_dim)
            for _ in range(layers)
        )
        gen = torch.Generator().manual_seed(12345)  # fixed permutations, saved in the state dict
        for i in range(layers):
            perm = torch.randperm(dim, generator=gen) if i % 2 == 0 else torch.arange(dim).flip(0)
            self.register_buffer(f"perm{i}", perm)
        self.reset_to_identity()

    def reset_to_identity(self) -> None:
        """Zero the output layers: every member starts as y = z (a standard normal)."""
        with torch.no_grad():
            lasts: list[EnsembleLinear] = [
                self._cond(i).last for i in range(len(self.conditioners))
            ]
            for lin in [self.base, *lasts]:
                lin.weight.zero_()
                lin.bias.zero_()
            if self.transform == "spline":
                for lin in lasts:
                    view = lin.bias.view(self.members, 1, self.dim - self.split, -1)
                    view[..., 2 * self.bins :] = TAIL_DERIVATIVE_LOGIT  # unit slopes: identity

    def __call__(
        self, context: Tensor | None = None, members: Tensor | None = None, batch: int | None = None
    ) -> FlowDistribution:
        out: FlowDistribution = super().__call__(context, members, batch)
        return out

    def _cond(self, i: int) -> EnsembleMLP:
        net = self.conditioners[i]
        assert isinstance(net, EnsembleMLP)
        return net

    def forward(
        self, context: Tensor | None = None, members: Tensor | None = None, batch: int | None = None
    ) -> FlowDistribution:
        """The distribution for ``context`` ([B, C] shared, or [E', B, C] per member).

        ``members``: a subset of member indices (E' = len(members)); default all E members.
        Without a context (unconditional flow) give ``batch`` = B for sampling.
        """
        n = self.members if members is None else int(members.shape[0])
        if self.embed is None:
            if context is not None:
                raise ValueError("this flow has context_dim=0; pass batch=B, not a context")
            if batch is None:
                raise ValueError("an unconditional flow needs batch=B")
            dev = self.base.weight.device
            feat = torch.zeros(n, batch, 0, device=dev, dtype=self.base.weight.dtype)
        else:
            if context is None or context.shape[-1] != self.context_dim:
                got = None if context is None else tuple(context.shape)
                raise ValueError(
                    f"context must be [B, {self.context_dim}] or "
                    f"[E, B, {self.context_dim}], got {got}"
                )
            if context.dim() == 2:
                context = context.expand(n, *context.shape)
            feat = F.silu(self.embed(context, members))
        return FlowDistribution(self, feat, members, single=False)

    # --- the bijection; h: [E', B, F] context features -------------------------------------

    def _base_params(self, h: Tensor, members: Tensor | None) -> tuple[Tensor, Tensor]:
        # In fp32 under AMP: a bf16 loc is off by ~2e-3 standardised units, more than the
        # flow's finest scales (the conditioners' output layers are fp32 too: EnsembleMLP).
        with fp32(h):
            loc, raw = self.base(_full(h), members).chunk(2, dim=-1)
        return loc, _bounded(raw, *self.log_scale_bounds)

    def _coupling_params(self, i: int, u_a: Tensor, h: Tensor, members: Tensor | None) -> Tensor:
        net = self._cond(i)
        out = _full(net(torch.cat([u_a.to(h.dtype), h], dim=-1), members))
        return out.view(*out.shape[:-1], self.dim - self.split, -1)

    def _couple(self, u_b: Tensor, params: Tensor, inverse: bool) -> tuple[Tensor, Tensor]:
        with torch.autocast(u_b.device.type, enabled=False):  # transforms and log-dets in fp32
            return self._couple_fp32(_full(u_b), _full(params), inverse)

    def _couple_fp32(self, u_b: Tensor, params: Tensor, inverse: bool) -> tuple[Tensor, Tensor]:
        if self.transform == "spline":
            out, logdet = rq_spline(u_b, params, self.tail_bound, inverse=inverse)
            return out, logdet.sum(-1)
        shift, raw = params[..., 0], params[..., 1]
        log_scale = self.affine_clamp * torch.tanh(raw / self.affine_clamp)  # scale in e^±clamp
        if inverse:
            return (u_b - shift) * torch.exp(-log_scale), -log_scale.sum(-1)
        return u_b * torch.exp(log_scale) + shift, log_scale.sum(-1)

    def to_noise(self, y: Tensor, h: Tensor, members: Tensor | None) -> tuple[Tensor, Tensor]:
        """y [E', B, D] -> (z, log|det dz/dy| [E', B])."""
        loc, log_scale = self._base_params(h, members)
        u = (_full(y) - loc) * torch.exp(-log_scale)
        logdet = -log_scale.sum(-1)
        for i in range(len(self.conditioners)):
            u, ld = self._layer(i, u, h, members, inverse=False)
            logdet = logdet + ld
        return u, logdet

    def to_data(self, z: Tensor, h: Tensor, members: Tensor | None) -> tuple[Tensor, Tensor]:
        """z [E', B, D] -> (y, log|det dy/dz| [E', B]); one pass per layer."""
        u = _full(z)
        logdet = torch.zeros(z.shape[:-1], device=z.device, dtype=u.dtype)
        for i in reversed(range(len(self.conditioners))):
            u, ld = self._layer(i, u, h, members, inverse=True)
            logdet = logdet + ld
        loc, log_scale = self._base_params(h, members)
        return u * torch.exp(log_scale) + loc, logdet + log_scale.sum(-1)

    def _layer(
        self, i: int, u: Tensor, h: Tensor, members: Tensor | None, inverse: bool
    ) -> tuple[Tensor, Tensor]:
        perm: Tensor = getattr(self, f"perm{i}")
        if inverse:
            u_a, u_b = u[..., : self.split], u[..., self.split :]
            params = self._coupling_params(i, u_a, h, members)
            u_b, logdet = self._couple(u_b, params, inverse=True)
            return torch.cat([u_a, u_b], -1)[..., torch.argsort(perm)], logdet
        u = u[..., perm]
        u_a, u_b = u[..., : self.split], u[..., self.split :]
        params = self._coupling_params(i, u_a, h, members)
        u_b, logdet = self._couple(u_b, params, inverse=False)
        return torch.cat([u_a, u_b], -1), logdet


class FlowDistribution(Distribution):
    """A ``torch.distributions.Distribution`` over y: batch shape [E', B] (per member), or [B]
    for a single :class:`ConditionalFlow`; event shape [dim]. Samples are reparameterised."""

    has_rsample = True
    arg_constraints: ClassVar[dict[str, constraints.Constraint]] = {}  # nothing to validate
    support = constraints.real_vector

    def __init__(
        self, flow: EnsembleConditionalFlow, h: Tensor, members: Tensor | None, single: bool
    ) -> None:
        self.flow, self.h, self.members, self.single = flow, h, members, single
        batch = h.shape[1:2] if single else h.shape[:2]
        super().__init__(torch.Size(batch), torch.Size([flow.dim]), validate_args=False)

    def log_prob(self, value: Tensor) -> Tensor:
        """log p(value) in fp32, for value [*S, *batch_shape, D] (an ensemble also takes
        [B, D], shared by the members) -> [*S, *batch_shape]."""
        e, b, f = self.h.shape
        if not self.single and value.dim() == 2:
            value = value.expand(e, *value.shape)
        if self.single:
            value = value.unsqueeze(-3)  # [*S, 1, B, D]
        lead = value.shape[:-3]  # sample dims S
        s = math.prod(lead)
        y = value.movedim(-3, 0).reshape(e, s * b, self.flow.dim)
        h = self.h if s == 1 else self.h.unsqueeze(1).expand(e, s, b, f).reshape(e, s * b, f)
        z, logdet = self.flow.to_noise(y, h, self.members)
        out = (logdet - 0.5 * z.square().sum(-1) - self.flow.dim * _HALF_LOG_2PI).view(e, *lead, b)
        out = out.movedim(0, len(lead))  # [*S, E', B]
        return out.squeeze(-2) if self.single else out

    def rsample(
        self, sample_shape: Sequence[int] = (), generator: torch.Generator | None = None
    ) -> Tensor:
        """Reparameterised samples [*sample_shape, *batch_shape, dim]."""
        return self._to_data(sample_shape, generator, zero=False)

    def sample(
        self, sample_shape: Sequence[int] = (), generator: torch.Generator | None = None
    ) -> Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape, generator)

    @property
    def mode(self) -> Tensor:
        """The image of z = 0: a point prediction (the median for one layer, close to it after)."""
        with torch.no_grad():
            return self._to_data((), None, zero=True)

    def _to_data(
        self, sample_shape: Sequence[int], generator: torch.Generator | None, zero: bool
    ) -> Tensor:
        if isinstance(sample_shape, torch.Generator):
            raise TypeError("sample(sample_shape=(), generator=None): pass the generator by name")
        e, b, f = self.h.shape
        s = math.prod(sample_shape)
        # Extra samples become extra rows of each member's batch: [E', S * B, .].
        h = self.h if s == 1 else self.h.unsqueeze(1).expand(e, s, b, f).reshape(e, s * b, f)
        shape, dtype = (e, s * b, self.flow.dim), _full(self.h).dtype
        if zero:
            z = torch.zeros(shape, device=h.device, dtype=dtype)
        else:
            z = torch.randn(shape, generator=generator, device=h.device, dtype=dtype)
        y = self.flow.to_data(z, h, self.members)[0].view(e, *sample_shape, b, self.flow.dim)
        if self.single:
            return y[0]
        return y.movedim(0, len(sample_shape))  # [*sample_shape, E', B, D]


class ConditionalFlow(EnsembleConditionalFlow):
    """One flow p(y | context), no member dimension: ``ConditionalFlow(dim, context_dim)``,
    then ``flow(context [B, C])`` is a distribution with batch shape [B]; the keyword
    arguments are :class:`EnsembleConditionalFlow`'s.

    >>> import torch
    >>> flow = ConditionalFlow(dim=2, context_dim=3, layers=2)
    >>> dist = flow(torch.randn(5, 3))
    >>> dist.sample().shape, dist.log_prob(torch.zeros(5, 2)).shape, dist.sample((4,)).shape
    (torch.Size([5, 2]), torch.Size([5]), torch.Size([4, 5, 2]))
    """

    def __init__(self, dim: int, context_dim: int = 0, **kwargs: Any) -> None:
        super().__init__(1, dim, context_dim, **kwargs)

    def forward(
        self, context: Tensor | None = None, members: Tensor | None = None, batch: int | None = None
    ) -> FlowDistribution:
        if members is not None:
            raise ValueError("a ConditionalFlow has no members to choose from")
        if context is not None and context.dim() != 2:
            raise ValueError(f"context must be [B, {self.context_dim}], got {tuple(context.shape)}")
        dist = super().forward(context, None, batch)
        return FlowDistribution(self, dist.h, None, single=True)
