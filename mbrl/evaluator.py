"""Deterministic evaluation: N episodes run side by side, one batched actor call per step."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from mbrl.envs import make_env

DeterministicPolicy = Callable[[Tensor], Tensor]  # obs [B, obs_dim] -> act [B, act_dim]


class Evaluator:
    """Runs ``episodes`` envs in lockstep until each has finished one episode.

    Every evaluation starts from the same seeds (``seed + i``), so two evaluations differ only
    by the policy, not by the start states.
    """

    def __init__(
        self,
        env_name: str,
        episodes: int,
        seed: int,
        device: torch.device,
        max_episode_steps: int | None = None,
    ) -> None:
        self.envs: list[gym.Env] = [make_env(env_name, max_episode_steps) for _ in range(episodes)]
        self.seed, self.device = seed, device

    def run(self, policy: DeterministicPolicy) -> dict[str, float]:
        n = len(self.envs)
        obs = np.stack([e.reset(seed=self.seed + i)[0] for i, e in enumerate(self.envs)])
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        active = np.ones(n, dtype=bool)
        while active.any():
            idx = np.flatnonzero(active)
            obs_t = torch.as_tensor(obs[idx], dtype=torch.float32, device=self.device)
            actions = policy(obs_t).float().cpu().numpy()  # sync-ok: env boundary
            for row, i in enumerate(idx):
                o, r, term, trunc, _ = self.envs[i].step(actions[row])
                obs[i], returns[i], lengths[i] = o, returns[i] + r, lengths[i] + 1
                if term or trunc:
                    active[i] = False
        return {
            "eval/return_mean": float(returns.mean()),
            "eval/return_std": float(returns.std()),
            "eval/return_max": float(returns.max()),
            "eval/return_min": float(returns.min()),
            "eval/episode_length_mean": float(lengths.mean()),
        }

    def close(self) -> None:
        for env in self.envs:
            env.close()
