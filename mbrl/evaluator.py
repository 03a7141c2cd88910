"""Deterministic evaluation: N episodes run side by side as one vector env, one batched actor
call per step; and the episode-after-episode reference it must agree with."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import Tensor

from mbrl.envs.vector import make_vector_env, resolve_vector

DeterministicPolicy = Callable[[Tensor], Tensor]  # obs [B, obs_dim] -> act [B, act_dim]
# A run evaluates on episodes from seeds seed + EVAL_SEED + i: apart from its training envs'
EVAL_SEED = 10_000


class Evaluator:
    """Runs ``episodes`` copies of the env as one vector env until each copy has finished its
    first episode; copy i starts from seed ``seed + i``.

    Every evaluation starts from the same seeds, so two evaluations differ only by the policy,
    not by the start states. ``vector``: ``sync`` | ``async`` | ``auto``
    (:func:`~mbrl.envs.vector.resolve_vector`). After :meth:`run`, ``last_returns`` and
    ``last_lengths`` hold each episode's return and length, in seed order.
    """

    def __init__(
        self,
        env_name: str,
        episodes: int,
        seed: int,
        device: torch.device,
        max_episode_steps: int | None = None,
        *,
        vector: str = "auto",
        version: str | None = None,
    ) -> None:
        self.mode = resolve_vector(vector, episodes)
        # SAME_STEP, not DISABLED: a finished copy is still stepped with the others (a vector
        # step steps every copy), and DISABLED refuses to step a finished copy until it is
        # reset by hand - one more round trip to the workers. SAME_STEP resets it inside the
        # step that ended it, so it runs a well-defined new episode whose rewards are masked.
        self.envs = make_vector_env(
            env_name, episodes, self.mode, max_episode_steps, AutoresetMode.SAME_STEP, version
        )
        self.seed, self.device = seed, device
        self.last_returns = np.zeros(episodes)
        self.last_lengths = np.zeros(episodes, dtype=np.int64)

    def run(self, policy: DeterministicPolicy) -> dict[str, float]:
        """One evaluation: ``eval/*`` scalars over the ``episodes`` first episodes."""
        self.last_returns, self.last_lengths = self._first_episodes(policy)
        return episode_metrics(self.last_returns, self.last_lengths)

    def _first_episodes(self, policy: DeterministicPolicy) -> tuple[np.ndarray, np.ndarray]:
        n = self.envs.num_envs
        obs, _ = self.envs.reset(seed=self.seed)  # an int seed gives copy i seed + i
        returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        running = np.ones(n, dtype=bool)  # copies still in their first episode
        while running.any():
            # Every copy's row, finished or not: one fixed batch shape per step.
            obs, rew, terminated, truncated, _ = self.envs.step(act(policy, obs, self.device))
            returns[running] += rew[running]
            lengths += running
            running &= ~(terminated | truncated)
        return returns, lengths

    def close(self) -> None:
        self.envs.close()


def act(policy: DeterministicPolicy, obs: np.ndarray, device: torch.device) -> np.ndarray:
    """Actions [B, act_dim] (float32, host) for observations [B, obs_dim]."""
    with torch.no_grad():  # evaluation never back-propagates
        obs_t = torch.as_tensor(obs, dtype=torch.float32, device=device)
        return policy(obs_t).float().cpu().numpy()  # sync-ok: env boundary


def episode_metrics(returns: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
    """The ``eval/*`` scalars the logger writes, from per-episode returns and lengths."""
    return {
        "eval/return_mean": float(returns.mean()),
        "eval/return_std": float(returns.std()),
        "eval/return_max": float(returns.max()),
        "eval/return_min": float(returns.min()),
        "eval/episode_length_mean": float(lengths.mean()),
    }


def sequential_episodes(
    env: gym.Env, episodes: int, seed: int, policy: DeterministicPolicy, device: torch.device
) -> tuple[np.ndarray, np.ndarray]:
    """Per-episode returns and lengths of episodes ``0..episodes-1``, episode i from seed
    ``seed + i``. One env serves them all: ``reset(seed=...)`` reseeds its RNG and rebuilds
    its whole state, so it starts exactly like a fresh copy (the tests check this against the
    vector env's fresh copies)."""
    returns, lengths = np.zeros(episodes), np.zeros(episodes, dtype=np.int64)
    for i in range(episodes):
        returns[i], lengths[i] = _one_episode(env, seed + i, policy, device)
    return returns, lengths


def _one_episode(
    env: gym.Env, seed: int, policy: DeterministicPolicy, device: torch.device
) -> tuple[float, int]:
    obs, _ = env.reset(seed=seed)
    ret, length, done = 0.0, 0, False
    while not done:
        obs, rew, terminated, truncated, _ = env.step(act(policy, obs[None], device)[0])
        ret, length, done = ret + float(rew), length + 1, bool(terminated or truncated)
    return ret, length
