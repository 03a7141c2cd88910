"""Steps the real environment with the current policy and writes transitions to the buffer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mbrl import collectives
from mbrl.buffer import ReplayBuffer
from mbrl.clock import clock
from mbrl.envs.vector import VectorEnvs, get_states, set_states
from mbrl.staging import HostStager

Policy = Callable[[Tensor], Tensor]  # obs [N, obs_dim] -> act [N, act_dim] in [-1, 1]


class Collector:
    """N copies of the env (a gymnasium vector env, N = ``env.num_envs``), one step each per
    :meth:`step`: the policy acts once on the batch of N observations, and N transitions reach
    the buffer. With N = 1 this is MBPO's and SAC's one env step per iteration.

    The vector env resets a copy in the step that ends its episode (``SAME_STEP`` autoreset),
    so the stored ``next_obs`` of that row is the episode's final observation (from
    ``info["final_obs"]``), never the next episode's first one. An action holding NaN or inf
    (a policy whose weights diverged) never reaches the training env or the buffer: the copy
    acts with zeros, the middle of the action range, in its place (what MuJoCo itself applies
    when a control is NaN: it zeroes every control), and ``nonfinite_actions`` counts those env
    steps. (Evaluation, ``mbrl.evaluator``, acts with the policy's own action, NaN included.)
    The policy runs on
    ``act_device``; the rows reach the buffer's device through a :class:`HostStager` (one
    pinned, non-blocking copy per step).

    ``commit``: when a transition reaches the buffer. ``step``: at once. ``episode``: when its
    episode ends (terminated or truncated), as MBPO's sampler adds a whole path to its pool
    (softlearning's ``SimpleSampler.sample``): until then each copy's episode in progress is
    held on the host (``episode_limit`` rows at most), and it is part of the checkpoint.
    """

    def __init__(
        self,
        envs: VectorEnvs,
        buffer: ReplayBuffer,
        act_device: torch.device,
        seed: int,
        world: int = 1,
        commit: str = "step",
        episode_limit: int = 1000,
    ) -> None:
        """``world``: ranks of a run on several processes, each stepping its own copies."""
        if commit not in ("step", "episode"):
            raise ValueError(f"commit={commit!r} is not allowed; choose step or episode")
        self.envs, self.buffer, self.device = envs, buffer, act_device
        self.num_envs = n = envs.num_envs
        self.step_size = n * world  # env steps of the whole run per step() (all ranks)
        shapes = {k: tuple(v.shape[1:]) for k, v in buffer.data.items()}
        self.stager = HostStager(shapes, buffer.device, batch=n)
        self.commit = commit
        width = self.stager.host.shape[-1]
        # Each copy's episode in progress (episode commits): packed rows, and how many.
        self._pending = np.zeros((n, episode_limit if commit == "episode" else 0, width), "f4")
        self._pending_len = np.zeros(n, dtype=np.int64)
        obs, _ = envs.reset(seed=seed)  # copy i gets seed + i
        self._obs = obs
        self.envstep_count = 0  # env steps of all copies (and all ranks) together
        self.episode_count = 0
        self.nonfinite_actions = 0  # env steps (of this rank) that acted with zeros instead
        self._ep_return = np.zeros(n)
        self._ep_len = np.zeros(n, dtype=np.int64)
        self._finished: list[tuple[float, int]] = []  # (return, length) since the last metrics()
        self._clock = clock()
        self._steps_at_clock = 0

    def obs_tensor(self) -> Tensor:
        """The current observations as [N, obs_dim] on the acting device."""
        return torch.as_tensor(self._obs, dtype=torch.float32, device=self.device)

    def step(self, policy: Policy) -> None:
        actions = policy(self.obs_tensor()).float().cpu().numpy()  # sync-ok: env needs them
        if not np.isfinite(actions).all():
            actions = self._zero_nonfinite(actions)
        next_obs, rew, terminated, truncated, info = self.envs.step(actions)
        done = np.logical_or(terminated, truncated)
        stored_next = next_obs
        if done.any():  # those copies were reset: next_obs holds their new first observation
            stored_next = next_obs.copy()
            for i in np.flatnonzero(done):  # only the copies whose episode ended this step
                stored_next[i] = info["final_obs"][i]
        values = {
            "obs": self._obs,
            "act": actions,
            "rew": rew,
            "next_obs": stored_next,
            "terminated": terminated,
            "truncated": truncated,
        }
        if self.commit == "step":
            self.buffer.add(self.stager.stage(values))
        else:
            self._hold(self.stager.pack(values), done)
        self.envstep_count += self.step_size
        self._ep_return += rew
        self._ep_len += 1
        for i in np.flatnonzero(done):
            self._finished.append((float(self._ep_return[i]), int(self._ep_len[i])))
            self.episode_count += 1
        self._ep_return[done], self._ep_len[done] = 0.0, 0
        self._obs = next_obs

    def _zero_nonfinite(self, actions: np.ndarray) -> np.ndarray:
        """``actions`` with each copy's row that holds a NaN or inf set to zeros, counted."""
        bad = ~np.isfinite(actions).all(axis=1)
        self.nonfinite_actions += int(bad.sum())
        actions = actions.copy()
        actions[bad] = 0.0
        return actions

    def _hold(self, packed: np.ndarray, done: np.ndarray) -> None:
        """Append each copy's row to its episode in progress; add the finished episodes to
        the buffer, in copy order."""
        copies = np.arange(self.num_envs)
        if (self._pending_len >= self._pending.shape[1]).any():
            raise RuntimeError(
                f"an episode ran past {self._pending.shape[1]} steps, the collector's "
                "episode_limit (the env's time limit)"
            )
        self._pending[copies, self._pending_len] = packed
        self._pending_len += 1
        for i in np.flatnonzero(done):
            self.buffer.add(self.stager.rows_to_device(self._pending[i, : self._pending_len[i]]))
            self._pending_len[i] = 0

    def metrics(self) -> dict[str, Any]:
        """Counters, env steps/s since the last call, and returns of episodes finished since,
        over every rank of a run on several processes (every rank must call it)."""
        now = clock()
        rate = (self.envstep_count - self._steps_at_clock) / max(now - self._clock, 1e-9)
        self._clock, self._steps_at_clock = now, self.envstep_count
        out: dict[str, Any] = {
            "collector/envstep_count": self.envstep_count,
            "collector/episode_count": collectives.sum_int(self.episode_count),
            "collector/nonfinite_actions": collectives.sum_int(self.nonfinite_actions),
            "collector/avg_envstep_per_sec": rate,
        }
        finished = [e for part in collectives.all_gather_objects(self._finished) for e in part]
        if finished:
            returns = np.array([r for r, _ in finished])
            lengths = np.array([n for _, n in finished])
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
            "envs": get_states(self.envs),
            "obs": np.array(self._obs, copy=True),
            "envstep_count": self.envstep_count,
            "episode_count": self.episode_count,
            "nonfinite_actions": self.nonfinite_actions,
            "ep_return": self._ep_return.copy(),
            "ep_len": self._ep_len.copy(),
            "finished": list(self._finished),
            # The episodes in progress (episode commits): part of the run's state.
            "pending": [self._pending[i, :k].copy() for i, k in enumerate(self._pending_len)],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["envs"]) != self.num_envs:
            raise ValueError(
                f"the checkpoint holds {len(state['envs'])} env copies; this run has "
                f"env.num_envs={self.num_envs}: resume with env.num_envs={len(state['envs'])}"
            )
        set_states(self.envs, state["envs"])
        self._obs = np.array(state["obs"], copy=True)
        self.envstep_count, self.episode_count = state["envstep_count"], state["episode_count"]
        self.nonfinite_actions = state.get("nonfinite_actions", 0)  # (older checkpoints: none)
        self._ep_return = np.array(state["ep_return"], dtype=np.float64)
        self._ep_len = np.array(state["ep_len"], dtype=np.int64)
        self._finished = list(state["finished"])
        self._steps_at_clock = self.envstep_count
        self._pending_len[:] = 0
        for i, rows in enumerate(state.get("pending", [])):
            if len(rows) and self.commit != "episode":
                raise ValueError(
                    "the checkpoint holds episodes in progress (mbpo.real_data=episode); "
                    "resume with the same mbpo.real_data"
                )
            self._pending[i, : len(rows)] = rows
            self._pending_len[i] = len(rows)

    def close(self) -> None:
        self.envs.close()
