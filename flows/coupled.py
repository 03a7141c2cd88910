"""Coupled flows (after CFIL, Freund, Sarafian & Kraus, ICML 2023).

Two unconditional flows p1, p2 over the same space; their log-density difference
``x(z) = log p1(z) - log p2(z)`` is trained with the Donsker-Varadhan bound

    KL(Q || P) >= E_Q[x] - log E_P[exp x]      (tight at x = log dQ/dP + const)

so minimising ``logsumexp(x(p_samples)) - log N - mean(x(q_samples))`` drives ``x`` towards
``log(dQ/dP)`` up to an additive constant that the objective cannot see (the loss is the same
for x and x + c). :meth:`CoupledFlows.calibrate` removes it: it sets ``offset`` so that
``log E_P[exp x] = 0``, the normalisation every density ratio dQ/dP has (E_P[dQ/dP] = 1).
Neither flow is a density estimate on its own; only the difference matters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from flows.defaults import DEFAULTS
from flows.flow import ConditionalFlow


class CoupledFlows(nn.Module):
    def __init__(
        self,
        dim: int,
        *,
        layers: int = DEFAULTS.layers,
        transform: str = DEFAULTS.transform,
        hidden: Sequence[int] = DEFAULTS.hidden,
        bins: int = DEFAULTS.bins,
        tail_bound: float = DEFAULTS.tail_bound,
    ) -> None:
        super().__init__()

        def flow() -> ConditionalFlow:
            return ConditionalFlow(
                dim,
                layers=layers,
                transform=transform,
                hidden=hidden,
                bins=bins,
                tail_bound=tail_bound,
            )

        self.p1, self.p2 = flow(), flow()
        self.dim = dim
        self.offset: Tensor
        self.register_buffer("offset", torch.zeros(()))  # set by calibrate()

    def forward(self, z: Tensor) -> Tensor:
        """x(z) = log p1(z) - log p2(z) - offset; z: [B, dim] -> [B]."""
        n = z.shape[0]
        return self.p1(batch=n).log_prob(z) - self.p2(batch=n).log_prob(z) - self.offset

    def dv_loss(self, p_samples: Tensor, q_samples: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(loss, x on p_samples, x on q_samples); the optimum has x = log(dQ/dP) + const."""
        x_p, x_q = self(p_samples), self(q_samples)
        loss = torch.logsumexp(x_p, dim=0) - math.log(x_p.shape[0]) - x_q.mean()
        return loss, x_p, x_q

    @torch.no_grad()
    def calibrate(self, p_samples: Tensor, chunk: int = 8192) -> Tensor:
        """Set ``offset`` so that log mean exp(x) = 0 on ``p_samples`` [N, dim] (samples of P);
        returns the shift applied to x."""
        xs = torch.cat([self(p_samples[i : i + chunk]) for i in range(0, len(p_samples), chunk)])
        xs = xs[torch.isfinite(xs)]  # a corrupt sample must not make the offset NaN
        if xs.numel() == 0:
            return torch.zeros((), device=self.offset.device)
        shift = torch.logsumexp(xs, dim=0) - math.log(xs.shape[0])
        self.offset.add_(shift)
        return shift
