"""Batched H-step model rollouts written in place into the model pool, without host syncs.

Every row of the batch advances together: the actor acts, a random elite predicts, the env's
termination function decides which rows stop. A row that terminated, produced a non-finite
prediction or (``filter`` mode) looked too un-real stops being written; it is still computed
(masking costs less than compacting the batch, which would need the row count on the host).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from mbrl.agents import SAC
from mbrl.buffer import ReplayBuffer
from mbrl.config import RewarderConfig
from mbrl.envs.termination import TerminationFn
from mbrl.models.dynamics import DynamicsModel
from mbrl.rewarder import Rewarder


@torch.no_grad()
def rollout(
    model: DynamicsModel,
    agent: SAC,
    termination_fn: TerminationFn,
    start_obs: Tensor,
    length: int,
    pool: ReplayBuffer,
    generator: torch.Generator,
    rewarder: Rewarder | None = None,
    rcfg: RewarderConfig | None = None,
) -> dict[str, Any]:
    """Roll ``start_obs`` [B, obs_dim] ``length`` steps; returns ``rollout/*`` metric tensors."""
    obs = start_obs
    b, dev = obs.shape[0], obs.device
    alive = torch.ones(b, dtype=torch.bool, device=dev)
    written = torch.zeros((), dtype=torch.long, device=dev)
    nonfinite = torch.zeros((), dtype=torch.long, device=dev)
    filtered = torch.zeros((), dtype=torch.long, device=dev)
    score_sum = torch.zeros((), device=dev)
    no = torch.zeros(b, dtype=torch.bool, device=dev)
    for _ in range(length):
        act = agent.act(obs, deterministic=False, generator=generator).float()
        next_obs, rew = model.sample(obs, act, generator)
        finite = torch.isfinite(next_obs).all(-1) & torch.isfinite(rew)
        next_obs = torch.where(finite[:, None], next_obs, obs)  # keep NaNs out of later steps
        rew = torch.where(finite, rew, torch.zeros_like(rew))
        keep = alive & finite
        score = torch.zeros_like(rew)
        if rewarder is not None and rcfg is not None:
            score = torch.nan_to_num(
                rewarder.score(model, obs, act, next_obs, rew), nan=float("inf")
            )
            if rcfg.mode == "filter":
                filtered += (keep & (score > rcfg.threshold)).sum()
                keep = keep & (score <= rcfg.threshold)
            elif rcfg.mode == "penalty":
                rew = rew - rcfg.penalty * score
        terminated = termination_fn(obs, act, next_obs)
        pool.add(
            {
                "obs": obs,
                "act": act,
                "rew": rew,
                "next_obs": next_obs,
                "terminated": terminated,
                "truncated": no,
                "score": score,
            },
            mask=keep,
        )
        written += keep.sum()
        nonfinite += (alive & ~finite).sum()
        score_sum += torch.where(keep, score, torch.zeros_like(score)).sum()
        alive = keep & ~terminated
        obs = next_obs
    return {
        "rollout/length": length,
        "rollout/start_states": b,
        "rollout/transitions": written,
        "rollout/nonfinite": nonfinite,
        "rollout/filtered": filtered,
        "rollout/alive_at_end": alive.float().mean(),
        "rollout/score_mean": score_sum / written.clamp_min(1),
    }
