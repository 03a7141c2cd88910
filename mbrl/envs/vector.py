"""Several copies of an env stepped as one gymnasium vector env (sync or async workers).

Every copy is wrapped in :class:`ExactState`, whose ``exact_state`` attribute reads and writes
the copy's whole state (:func:`get_env_state`), so a checkpoint holds every copy's state even
when the copies live in worker processes (``get_attr`` / ``set_attr`` reach them there).
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from mbrl.envs.make import get_env_state, make_env, set_env_state

VectorEnvs = SyncVectorEnv | AsyncVectorEnv  # both reach their copies' attributes

ASYNC_FROM = 4  # `auto` runs copies in worker processes from this many on (see resolve_vector)
# The cores a run counts as its own, where several share a machine (scripts/seeds.py sets it to
# the machine's cores over its processes); unset: the machine's.
CORES_ENV = "FLOWMBPO_CORES"
WORKER_START = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


class ExactState(gym.Wrapper):
    """An env whose ``exact_state`` attribute is its whole state (physics, RNG, time limit)."""

    @property
    def exact_state(self) -> dict[str, Any]:
        return get_env_state(self.env)

    @exact_state.setter
    def exact_state(self, state: dict[str, Any]) -> None:
        set_env_state(self.env, state)


def _make_copy(name: str, max_episode_steps: int | None, version: str | None) -> gym.Env:
    return ExactState(make_env(name, max_episode_steps, version=version))


def resolve_vector(mode: str, num_envs: int, cores: int | None = None) -> str:
    """``auto`` -> ``async`` from :data:`ASYNC_FROM` copies on, when there is a core for each
    copy (worker processes that share cores wait for each other), else ``sync``."""
    if mode != "auto":
        return mode
    cores = own_cores() if cores is None else cores
    return "async" if ASYNC_FROM <= num_envs <= cores else "sync"


def own_cores() -> int:
    """The cores this run may use: ``$FLOWMBPO_CORES`` where set, else the machine's."""
    given = os.environ.get(CORES_ENV)
    if given is None:
        return os.cpu_count() or 1
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"{CORES_ENV}={given!r} is not allowed; give a whole number >= 1")
    return int(given)


def make_vector_env(
    name: str,
    num_envs: int,
    mode: str = "sync",
    max_episode_steps: int | None = None,
    autoreset: AutoresetMode = AutoresetMode.SAME_STEP,
    version: str | None = None,
) -> VectorEnvs:
    """``num_envs`` copies of :func:`make_env`'s env; ``mode``: ``sync`` (this process) or
    ``async`` (a worker process per copy, observations in shared memory).

    ``SAME_STEP`` autoreset: a step that ends an episode returns the next episode's first
    observation and puts the final one in ``info["final_obs"]``, so every vector step is
    ``num_envs`` real transitions (gymnasium's default, ``NEXT_STEP``, spends a step on the
    reset instead)."""
    if num_envs < 1:
        raise ValueError(f"num_envs={num_envs} is not allowed; it must be a positive integer")
    make = functools.partial(_make_copy, name, max_episode_steps, version)
    fns = [make for _ in range(num_envs)]
    if mode == "sync":
        return SyncVectorEnv(fns, autoreset_mode=autoreset)
    if mode == "async":
        # forkserver: a worker forked from this process after CUDA was initialised would
        # inherit a CUDA context it cannot use.
        return AsyncVectorEnv(
            fns, shared_memory=True, autoreset_mode=autoreset, context=WORKER_START
        )
    raise ValueError(f"vector mode {mode!r} is not allowed; choose sync or async")


def vector_dims(envs: VectorEnv) -> tuple[int, int]:
    """(obs_dim, act_dim) of one copy."""
    obs, act = envs.single_observation_space.shape, envs.single_action_space.shape
    assert obs is not None and act is not None
    return int(np.prod(obs)), int(np.prod(act))


def get_states(envs: VectorEnvs) -> list[dict[str, Any]]:
    """Every copy's :func:`get_env_state`, in order."""
    return list(envs.get_attr("exact_state"))


def set_states(envs: VectorEnvs, states: list[dict[str, Any]]) -> None:
    """Inverse of :func:`get_states`; each copy must have been reset once before."""
    if len(states) != envs.num_envs:
        raise ValueError(f"{len(states)} saved env states for {envs.num_envs} envs")
    envs.set_attr("exact_state", states)
