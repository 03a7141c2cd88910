"""A deterministic ensemble (``model=deterministic``; PETS' "DE" baseline, mbrl-lib's
``deterministic: true``): each member an MLP that predicts the standardised next-state change
and reward directly, trained on their mean squared error; early stopping and elites on the
holdout MSE in raw units. Rollouts use each elite's prediction as it is (no sampling noise:
the ensemble's disagreement, through the random elite per row, is its only spread)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from flows.nn import EnsembleMLP
from mbrl.config import ModelConfig
from mbrl.models.model_registry import register_model
from mbrl.models.protocol import ToRaw
from mbrl.models.scores import weighted_mean


@dataclass
class DeterministicConfig(ModelConfig):
    """``model=deterministic``: MLP members on MSE."""

    _target_: str = "mbrl.models.deterministic.DeterministicEnsemble"
    name: str = "deterministic"
    select_by: str = "mse"
    hidden: list[int] = field(default_factory=lambda: [200, 200, 200, 200])  # MLP per member

    def check(self) -> str | None:
        if not self.hidden or min(self.hidden) < 1:
            return f"model.hidden={self.hidden}: need one or more widths >= 1"
        return None


class DeterministicEnsemble(nn.Module):
    config = DeterministicConfig
    scores = ("mse",)
    shared = ()  # (every parameter has a member dimension)

    def __init__(self, dim: int, context_dim: int, cfg: DeterministicConfig) -> None:
        super().__init__()
        self.net = EnsembleMLP(cfg.members, context_dim, cfg.hidden, dim, act=nn.SiLU)

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        """x [B, C] (every member) or [E', B, C] -> predictions [E', B, D]."""
        if x.dim() == 2:
            n = self.net.last.weight.shape[0] if members is None else int(members.shape[0])
            x = x.expand(n, *x.shape)
        out: Tensor = self.net(x, members)
        return out

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
        """Each member's mean squared error (over rows and dims), summed over members."""
        mse = weighted_mean((self(x) - y).square().mean(-1), weight)
        return mse.sum(), mse

    def score(self, name: str, x: Tensor, y: Tensor, raw: ToRaw) -> Tensor:
        return (raw(self(x).float()) - raw(y)).square().mean(-1)

    @torch.no_grad()
    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        return self(x, members)


register_model("deterministic", DeterministicConfig)
