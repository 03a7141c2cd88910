"""Steps the real environment with the current policy and writes transitions to the buffer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from mbrl.buffer import ReplayBuffer
from mbrl.envs import get_env_state, set_env_state
from mbrl.runtime.staging import HostStager

Policy = Callable[[Tensor], Tensor]  # obs [1, obs_dim] -> act [1, act_dim] in [-1, 1]


class Collector:
    """One env, one step at a time (MBPO and SAC take one env step per iteration).

    The policy runs on ``act_device`` (the training device or the CPU); the transition reaches
    the buffer's device through a :class:`HostStager` (one pinned, non-blocking copy).
    """

    def __init__(
        self,
        env: gym.Env,
        buffer: ReplayBuffer,
        act_device: torch.device,
        seed: int,
    ) -> None:
        self.env, self.buffer, self.device = env, buffer, act_device
        shapes = {k: tuple(v.shape[1:]) for k, v in buffer.data.items()}
        self.stager = HostStager(shapes, buffer.device)
        obs, _ = env.reset(seed=seed)
        self._obs = obs
        self.envstep_count = 0
        self.episode_count = 0
        self._ep_return = 0.0
        self._ep_len = 0
        self._finished: list[tuple[float, int]] = []  # (return, length) since the last metrics()
        self._clock = time.perf_counter()
        self._steps_at_clock = 0

    def obs_tensor(self) -> Tensor:
        """The current observation as [1, obs_dim] on the acting device."""
        return torch.as_tensor(self._obs, dtype=torch.float32, device=self.device).unsqueeze(0)

    def step(self, policy: Policy) -> None:
        act_t = policy(self.obs_tensor())
        action = act_t[0].float().cpu().numpy()  # sync-ok: the env needs the action on host
        next_obs, rew, terminated, truncated, _ = self.env.step(action)
        staged = self.stager.stage(
            {
                "obs": self._obs,
                "act": action,
                "rew": float(rew),
                "next_obs": next_obs,
                "terminated": bool(terminated),
                "truncated": bool(truncated),
            }
        )
        self.buffer.add(staged)
        self.envstep_count += 1
        self._ep_return += float(rew)
        self._ep_len += 1
        if terminated or truncated:
            self._finished.append((self._ep_return, self._ep_len))
            self.episode_count += 1
            self._ep_return, self._ep_len = 0.0, 0
            next_obs, _ = self.env.reset()
        self._obs = next_obs

    def metrics(self) -> dict[str, Any]:
        """Counters, env steps/s since the last call, and returns of episodes finished since."""
        now = time.perf_counter()
        rate = (self.envstep_count - self._steps_at_clock) / max(now - self._clock, 1e-9)
        self._clock, self._steps_at_clock = now, self.envstep_count
        out: dict[str, Any] = {
            "collector/envstep_count": self.envstep_count,
            "collector/episode_count": self.episode_count,
            "collector/avg_envstep_per_sec": rate,
        }
        if self._finished:
            returns = np.array([r for r, _ in self._finished])
            lengths = np.array([n for _, n in self._finished])
            out.update(
                {
                    "collector/reward_mean": returns.mean(),
                    "collector/reward_std": returns.std(),
                    "collector/reward_max": returns.max(),
                    "collector/reward_min": returns.min(),
                    "collector/episode_length_mean": lengths.mean(),
                }
            )
            self._finished = []
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "env": get_env_state(self.env),
            "obs": np.array(self._obs, copy=True),
            "envstep_count": self.envstep_count,
            "episode_count": self.episode_count,
            "ep_return": self._ep_return,
            "ep_len": self._ep_len,
            "finished": list(self._finished),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_env_state(self.env, state["env"])
        self._obs = state["obs"]
        self.envstep_count, self.episode_count = state["envstep_count"], state["episode_count"]
        self._ep_return, self._ep_len = state["ep_return"], state["ep_len"]
        self._finished = list(state["finished"])
        self._steps_at_clock = self.envstep_count
