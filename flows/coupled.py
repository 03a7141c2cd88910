"""Coupled flows (after CFIL, Freund, Sarafian & Kraus, ICML 2023).

Two unconditional flows p1, p2 over the same space; their log-density difference
``x(z) = log p1(z) - log p2(z)`` is trained with the Donsker-Varadhan bound

    KL(Q || P) >= E_Q[x] - log E_P[exp x]      (tight at x = log dQ/dP + const)

so minimising ``logsumexp(x(p_samples)) - log N - mean(x(q_samples))`` drives ``x`` towards
``log(dQ/dP)``. Neither flow is a density estimate on its own; only the difference matters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from flows.flow import EnsembleConditionalFlow


class CoupledFlows(nn.Module):
    def __init__(
        self,
        dim: int,
        *,
        layers: int = 4,
        transform: str = "spline",
        hidden: Sequence[int] = (128, 128),
        bins: int = 8,
        tail_bound: float = 4.0,
    ) -> None:
        super().__init__()
        kw = {
            "layers": layers,
            "transform": transform,
            "hidden": hidden,
            "bins": bins,
            "tail_bound": tail_bound,
        }
        self.p1 = EnsembleConditionalFlow(1, dim, 0, **kw)  # type: ignore[arg-type]
        self.p2 = EnsembleConditionalFlow(1, dim, 0, **kw)  # type: ignore[arg-type]
        self.dim = dim

    def forward(self, z: Tensor) -> Tensor:
        """x(z) = log p1(z) - log p2(z); z: [B, dim] -> [B]."""
        n = z.shape[0]
        return self.p1(batch=n).log_prob(z)[0] - self.p2(batch=n).log_prob(z)[0]

    def dv_loss(self, p_samples: Tensor, q_samples: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(loss, x on p_samples, x on q_samples); the optimum has x = log(dQ/dP) + const."""
        x_p, x_q = self(p_samples), self(q_samples)
        loss = torch.logsumexp(x_p, dim=0) - math.log(x_p.shape[0]) - x_q.mean()
        return loss, x_p, x_q
