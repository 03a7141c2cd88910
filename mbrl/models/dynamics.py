"""The dynamics model: an ensemble density over [ds, r] given (s, a), in normalised units."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from torch import Tensor, nn

from flows import EnsembleConditionalFlow
from mbrl.config import ModelConfig
from mbrl.models.gaussian import GaussianEnsemble
from mbrl.models.normalizer import Normalizer


class Distribution(Protocol):
    """What the model reads from a member distribution (flow or Gaussian)."""

    def log_prob(self, value: Tensor) -> Tensor: ...
    def sample(
        self, sample_shape: Sequence[int] = (), generator: torch.Generator | None = None
    ) -> Tensor: ...
    @property
    def mode(self) -> Tensor: ...


def build_density(dim: int, context_dim: int, cfg: ModelConfig) -> nn.Module:
    if cfg.name == "gaussian":
        return GaussianEnsemble(cfg.members, dim, context_dim, cfg.hidden, cfg.l2_coefs)
    f = cfg.flow
    return EnsembleConditionalFlow(
        cfg.members,
        dim,
        context_dim,
        layers=f.layers,
        transform=f.transform,
        hidden=f.hidden,
        bins=f.bins,
        tail_bound=f.tail_bound,
        embed_hidden=f.embed_hidden,
        embed_dim=f.embed_dim,
    )


def weighted_mean(values: Tensor, weight: Tensor | None) -> Tensor:
    """Mean over dim 1 of ``values`` [E, b], over the rows of weight 1 (all rows: None)."""
    if weight is None:
        return values.mean(dim=1)
    return (values * weight).sum(dim=1) / weight.sum(dim=1)


class DynamicsModel(nn.Module):
    """p([s' - s, r] | s, a) for E members. Inputs are standardised inside; targets too when
    ``cfg.normalize_targets`` (the flow), else they stay raw (MBPO's Gaussian ensemble)."""

    elites: Tensor  # [n_elites] member indices used for rollouts

    def __init__(self, obs_dim: int, act_dim: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.obs_dim, self.act_dim, self.cfg = obs_dim, act_dim, cfg
        self.density_dim, self.context_dim = obs_dim + 1, obs_dim + act_dim
        self.density = build_density(self.density_dim, self.context_dim, cfg)
        self.in_norm = Normalizer(obs_dim + act_dim)
        self.out_norm = Normalizer(obs_dim + 1)
        self.register_buffer("elites", torch.arange(cfg.elites))

    @property
    def device(self) -> torch.device:
        return self.elites.device

    @staticmethod
    def targets(obs: Tensor, next_obs: Tensor, rew: Tensor) -> Tensor:
        """Raw targets [N, obs_dim + 1] = [s' - s, r]."""
        return torch.cat([next_obs - obs, rew.unsqueeze(-1)], dim=-1)

    def fit_normalizers(self, inputs: Tensor, target: Tensor) -> None:
        """inputs [N, obs + act], raw targets [N, obs + 1]: the training rows of a fit."""
        self.in_norm.fit(inputs)
        if self.cfg.targets_normalized:
            self.out_norm.fit(target)

    def dist(self, x: Tensor, members: Tensor | None = None) -> Distribution:
        """x: normalised inputs [B, C] or [E', B, C]."""
        out: Distribution = self.density(x, members)
        return out

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The training loss on a minibatch ``x`` [E, b, C], ``y`` [E, b, D] (model units), and
        a per-member train metric [E]: MBPO's loss for the Gaussian ensemble, the mean
        negative log-likelihood for the flow. ``weight`` [E, b]: 1 for a row, 0 for padding
        (means are over the weighted rows); None: all rows."""
        if isinstance(self.density, GaussianEnsemble):
            return self.density.mbpo_loss(x, y, weight)
        nll = -weighted_mean(self.dist(x).log_prob(y), weight)
        return nll.sum(), nll

    @torch.no_grad()
    def sample(
        self, obs: Tensor, act: Tensor, generator: torch.Generator | None = None
    ) -> tuple[Tensor, Tensor]:
        """(next_obs [B, o], rew [B]), each row from a uniformly random elite.

        A random permutation deals the rows out to the elites in equal shares, so each elite
        runs on B / n_elites rows (not all elites on all rows) and there is no host sync.
        """
        b, n = obs.shape[0], int(self.elites.shape[0])
        chunk = -(-b // n)
        perm = torch.randperm(b, generator=generator, device=obs.device)
        perm = torch.cat([perm, perm[: chunk * n - b]])  # pad so the rows split evenly
        x = self.in_norm(torch.cat([obs, act], dim=-1))[perm].view(n, chunk, -1)
        y = self.dist(x, self.elites).sample(generator=generator).reshape(n * chunk, -1)
        y = self.out_norm.inverse(y)
        out = torch.empty(b, y.shape[-1], device=obs.device, dtype=y.dtype)
        out[perm[:b]] = y[:b]  # the padding rows' samples are dropped
        return obs + out[:, : self.obs_dim], out[:, self.obs_dim]
