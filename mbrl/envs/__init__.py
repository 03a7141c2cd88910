"""Environments: gymnasium + MuJoCo, with batched torch termination functions."""

from mbrl.envs.make import env_dims, episode_limit, get_env_state, make_env, set_env_state
from mbrl.envs.registry import ENVS, EnvSpec, env_spec

__all__ = [
    "ENVS",
    "EnvSpec",
    "env_dims",
    "env_spec",
    "episode_limit",
    "get_env_state",
    "make_env",
    "set_env_state",
]
