"""The dynamics model: a world model (any :class:`~mbrl.models.protocol.WorldModel`) over
[ds, r] given (s, a), with the standardisation of its inputs and targets and its elites."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from mbrl.config import ModelConfig
from mbrl.models.model_registry import build_model
from mbrl.models.normalizer import Normalizer


class DynamicsModel(nn.Module):
    """p([s' - s, r] | s, a) for E members. Inputs are standardised inside; targets too when
    ``cfg.normalize_targets`` (the flow), else they stay raw (MBPO's Gaussian ensemble)."""

    elites: Tensor  # [n_elites] member indices used for rollouts

    def __init__(self, obs_dim: int, act_dim: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.obs_dim, self.act_dim, self.cfg = obs_dim, act_dim, cfg
        self.target_dim, self.context_dim = obs_dim + 1, obs_dim + act_dim
        self.ensemble: Any = build_model(self.target_dim, self.context_dim, cfg)  # a WorldModel
        self.in_norm = Normalizer(obs_dim + act_dim)
        self.out_norm = Normalizer(obs_dim + 1)
        self.register_buffer("elites", torch.arange(cfg.elites))

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # Checkpoints written before the ensemble had its name hold it under "density.".
        old = prefix + "density."
        for key in [k for k in state_dict if k.startswith(old)]:
            state_dict[prefix + "ensemble." + key[len(old) :]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

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
        if self.cfg.normalize_targets:
            self.out_norm.fit(target)

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The model's training loss on a minibatch ``x`` [E, b, C], ``y`` [E, b, D] (model
        units), and its per-member train metric [E]; ``weight`` [E, b]: 1 for a row, 0 for
        padding; None: all rows."""
        out: tuple[Tensor, Tensor] = self.ensemble.loss(x, y, weight)
        return out

    def score(self, name: str, x: Tensor, y: Tensor) -> Tensor:
        """Holdout score ``name`` per member and row [E, B], on normalised inputs ``x`` [B, C]
        and model-unit targets ``y`` [B, D]."""
        out: Tensor = self.ensemble.score(name, x, y, self.out_norm.inverse)
        return out

    @torch.no_grad()
    def elite_draws(
        self, obs: Tensor, act: Tensor, generator: torch.Generator | None = None, draws: int = 1
    ) -> Tensor:
        """Every elite's next-step targets [s' - s, r] for every row, in raw units, the mean
        of ``draws`` draws each: [n_elites, B, obs_dim + 1]. Their spread across the elites
        is each member's own noise (over ``draws``) plus the members' disagreement: docs/model.md
        (a MOPO-style penalty). It costs n_elites x ``draws`` times :meth:`sample`'s model work."""
        n, b = int(self.elites.shape[0]), obs.shape[0]
        x = self.in_norm(torch.cat([obs, act], dim=-1)).repeat(draws, 1)  # [draws * B, C]
        y = self.ensemble.sample(x.expand(n, *x.shape), self.elites, generator)
        return self.out_norm.inverse(y.view(n, draws, b, -1).mean(dim=1))

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
        y = self.ensemble.sample(x, self.elites, generator).reshape(n * chunk, -1)
        y = self.out_norm.inverse(y)
        out = torch.empty(b, y.shape[-1], device=obs.device, dtype=y.dtype)
        out[perm[:b]] = y[:b]  # the padding rows' samples are dropped
        return obs + out[:, : self.obs_dim], out[:, self.obs_dim]
