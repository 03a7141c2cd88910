"""Environments: gymnasium + MuJoCo, with batched torch termination functions; an env of your
own is one :func:`register_env` call (docs/model.md)."""

from mbrl.envs.make import env_dims, episode_limit, get_env_state, make_env, set_env_state
from mbrl.envs.specs import (
    ENVS,
    EnvSpec,
    EnvVersion,
    RolloutSchedule,
    env_spec,
    mbpo_settings,
    register_env,
)

__all__ = [
    "ENVS",
    "EnvSpec",
    "EnvVersion",
    "RolloutSchedule",
    "env_dims",
    "env_spec",
    "episode_limit",
    "get_env_state",
    "make_env",
    "mbpo_settings",
    "register_env",
    "set_env_state",
]
