"""MBPO's probabilistic ensemble: each member outputs a diagonal Gaussian (Chua et al. 2018).

Same interface as the flow: ``model(context, members)`` returns a distribution with
``log_prob``, ``rsample``/``sample`` and ``mode`` over a leading member dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from flows.nn import EnsembleMLP

_LOG_2PI = math.log(2 * math.pi)


class GaussianEnsemble(nn.Module):
    def __init__(self, members: int, dim: int, context_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.members, self.dim = members, dim
        self.net = EnsembleMLP(members, context_dim, hidden, 2 * dim, act=nn.SiLU)
        # Learned soft bounds on the log-variance (PETS / MBPO), one pair per member so that
        # each member is a model of its own (best-epoch snapshots are exact per member).
        self.max_logvar = nn.Parameter(torch.full((members, 1, dim), 0.5))
        self.min_logvar = nn.Parameter(torch.full((members, 1, dim), -10.0))

    def forward(self, context: Tensor, members: Tensor | None = None) -> GaussianDistribution:
        """context: [B, C] (shared) or [E', B, C]."""
        if context.dim() == 2:
            n = self.members if members is None else int(members.shape[0])
            context = context.expand(n, *context.shape)
        mean, raw = self.net(context, members).float().chunk(2, dim=-1)
        hi: Tensor = self.max_logvar
        lo: Tensor = self.min_logvar
        if members is not None:
            hi, lo = hi[members], lo[members]
        logvar = hi - nn.functional.softplus(hi - raw)
        logvar = lo + nn.functional.softplus(logvar - lo)
        return GaussianDistribution(mean, logvar)

    def regularizer(self) -> Tensor:
        """Pulls the log-variance bounds together (weight 0.01, as PETS / MBPO)."""
        return 0.01 * (self.max_logvar.sum() - self.min_logvar.sum())


class GaussianDistribution:
    """Diagonal Gaussians; batch shape [E', B], event shape [dim]."""

    def __init__(self, mean: Tensor, logvar: Tensor) -> None:
        self.mean, self.logvar = mean, logvar
        self.batch_shape = mean.shape[:-1]

    def log_prob(self, y: Tensor) -> Tensor:
        """y: [B, D] or [E', B, D] -> [E', B]."""
        inv_var = torch.exp(-self.logvar)
        return -0.5 * ((y - self.mean).square() * inv_var + self.logvar + _LOG_2PI).sum(-1)

    def rsample(self, generator: torch.Generator | None = None) -> Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device)
        return self.mean + torch.exp(0.5 * self.logvar) * noise

    @torch.no_grad()
    def sample(self, generator: torch.Generator | None = None) -> Tensor:
        return self.rsample(generator)

    def mode(self) -> Tensor:
        return self.mean
