"""Batched termination functions: ``(obs, act, next_obs) -> bool[B]``.

MBPO's model rollouts need to know when an imagined transition ends the episode. Each function
reproduces the ``terminated`` flag of the gymnasium v5 environment (default arguments,
``exclude_current_positions_from_observation=True``) from observations alone, for a whole batch
at once. The constants are the environments' own defaults (gymnasium ``*_v5.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

TerminationFn = Callable[[Tensor, Tensor, Tensor], Tensor]


def _check(obs: Tensor, act: Tensor, next_obs: Tensor) -> None:
    if next_obs.dim() != 2 or obs.shape != next_obs.shape or act.shape[0] != obs.shape[0]:
        raise ValueError(
            f"termination fn expects obs/next_obs [B, obs_dim] and act [B, act_dim]; got "
            f"obs {tuple(obs.shape)}, act {tuple(act.shape)}, next_obs {tuple(next_obs.shape)}"
        )


def never(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """HalfCheetah and Pendulum never terminate (they are only truncated by the time limit)."""
    _check(obs, act, next_obs)
    return torch.zeros(next_obs.shape[0], dtype=torch.bool, device=next_obs.device)


def hopper(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """Hopper-v5: obs[0] = z, obs[1] = torso angle, obs[1:] = qpos[2:] ++ clip(qvel, ±10)."""
    _check(obs, act, next_obs)
    z, angle = next_obs[:, 0], next_obs[:, 1]
    # The env checks the unclipped qvel against ±100; the observation clips qvel to ±10, so
    # the state check can only fail on qpos entries here (qvel beyond ±100 is never observed).
    healthy_state = ((next_obs[:, 1:] > -100.0) & (next_obs[:, 1:] < 100.0)).all(dim=1)
    healthy_z = z > 0.7
    healthy_angle = (angle > -0.2) & (angle < 0.2)
    return ~(healthy_state & healthy_z & healthy_angle)


def walker2d(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """Walker2d-v5: healthy while 0.8 < z < 2.0 and -1 < angle < 1."""
    _check(obs, act, next_obs)
    z, angle = next_obs[:, 0], next_obs[:, 1]
    healthy = (z > 0.8) & (z < 2.0) & (angle > -1.0) & (angle < 1.0)
    return ~healthy


def ant(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """Ant-v5: healthy while the state is finite and 0.2 <= z <= 1.0 (closed interval)."""
    _check(obs, act, next_obs)
    z = next_obs[:, 0]
    # The env checks qpos ++ qvel for finiteness; the observation holds qpos[2:] ++ qvel and
    # contact forces, which are finite whenever qpos/qvel are.
    healthy = torch.isfinite(next_obs).all(dim=1) & (z >= 0.2) & (z <= 1.0)
    return ~healthy


def humanoid(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """Humanoid-v5: healthy while 1.0 < z < 2.0, z = obs[0] = qpos[2]."""
    _check(obs, act, next_obs)
    z = next_obs[:, 0]
    return ~((z > 1.0) & (z < 2.0))


def inverted_pendulum(obs: Tensor, act: Tensor, next_obs: Tensor) -> Tensor:
    """InvertedPendulum-v5: terminated when the state is not finite or |pole angle| > 0.2."""
    _check(obs, act, next_obs)
    finite = torch.isfinite(next_obs).all(dim=1)
    return ~finite | (next_obs[:, 1].abs() > 0.2)
