"""Creating environments and saving/restoring their exact state (for bit-exact resume)."""

from __future__ import annotations

import copy
import logging
import os
import pickle
import warnings
from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

try:
    import mujoco
except Exception as err:  # MUJOCO_GL names a GL library the machine lacks: many exception types
    if not os.environ.get("MUJOCO_GL"):
        raise
    raise ImportError(
        f"MuJoCo could not load the OpenGL backend MUJOCO_GL={os.environ['MUJOCO_GL']!r} "
        f"({type(err).__name__}: {err}); training and evaluation render nothing: unset MUJOCO_GL "
        "or set MUJOCO_GL=disable (videos need egl with libEGL, or osmesa with libosmesa)",
        name="mujoco",
    ) from err
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.wrappers import RescaleAction, TimeLimit, TransformObservation

from mbrl.envs.specs import env_spec

_warned: set[str] = set()  # MuJoCo's warnings logged in this process, by kind


def _mujoco_warning(text: str) -> None:
    """MuJoCo's warnings (a NaN control, an unstable simulation) as this process's log records,
    each kind once (MuJoCo repeats one at every episode that hits it), instead of its own line
    on stdout and a MUJOCO_LOG.TXT written into the working directory."""
    kind = text.split(" Time = ")[0]
    if kind not in _warned:
        _warned.add(kind)
        logging.getLogger(__name__).warning(f"MuJoCo: {text.strip()} (said once per process)")


mujoco.set_mju_user_warning(_mujoco_warning)


def make_env(
    name: str,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    version: str | None = None,
) -> gym.Env:
    """A single gymnasium env whose actions are rescaled to [-1, 1]; ``version``: one of the
    env's versions (None: its default, e.g. v5 for the MuJoCo envs).

    The agent always acts in [-1, 1]: the buffers, the dynamics model and SAC never see an
    env's own action bounds (Pendulum's ±2, Humanoid's ±0.4).
    """
    chosen = env_spec(name).version(version)
    kwargs: dict[str, Any] = dict(chosen.kwargs)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    with warnings.catch_warnings():  # (gymnasium: "v4 is out of date": chosen on purpose)
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        env = gym.make(chosen.gym_id, **kwargs)
    if chosen.obs_dims is not None:
        env = _first_entries(env, chosen.obs_dims)
    if chosen.contact_cost is not None:
        env = ContactCost(env, chosen.contact_cost)
    if not isinstance(env.action_space, gym.spaces.Box):
        raise TypeError(f"env {name!r} has a non-Box action space {env.action_space}")
    space = env.action_space
    low = np.full(space.shape, -1.0, dtype=space.dtype)
    return RescaleAction(env, min_action=low, max_action=-low)


def _first_entries(env: gym.Env, dims: int) -> gym.Env:
    """The env with each observation cut to its first ``dims`` entries."""
    space = env.observation_space
    assert isinstance(space, gym.spaces.Box)
    low, high = space.low[:dims], space.high[:dims]
    box = gym.spaces.Box(low, high, dtype=space.dtype)
    return TransformObservation(env, lambda obs: obs[:dims], box)


class ContactCost(gym.Wrapper):
    """Subtracts ``cost(data)``, read from the MuJoCo env's ``data`` after each step, from the
    step's reward and reports it as ``info["reward_contact"]`` (as v5 reports its own): the
    contact cost MBPO's envs charge and an env version lacks (mbrl/envs/costs.py)."""

    def __init__(self, env: gym.Env, cost: Callable[[Any], float]) -> None:
        super().__init__(env)
        self._cost = cost

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        cost = self._cost(self.env.unwrapped.data)  # type: ignore[attr-defined]
        said = {**info, "reward_contact": 0.0 - cost}  # (0.0 - 0.0: no "-0.0" without contact)
        return obs, float(reward) - cost, terminated, truncated, said


def episode_limit(name: str, version: str | None, max_episode_steps: int | None) -> int:
    """The most steps an episode of this env can take (its time limit, or the one set)."""
    if max_episode_steps is not None:
        return max_episode_steps
    limit = gym.spec(env_spec(name).version(version).gym_id).max_episode_steps
    if limit is None:
        raise ValueError(f"env {name!r} has no time limit; set env.max_episode_steps")
    return int(limit)


def alive_bonus(name: str, version: str | None) -> float | None:
    """The reward an env pays per step for staying alive (Hopper 1, Humanoid 5), or None for
    an env without one: a policy that stands still earns about this times its length."""
    env = make_env(name, version=version)
    bonus = getattr(env.unwrapped, "_healthy_reward", None)
    env.close()
    return None if bonus is None else float(bonus)


def env_dims(env: gym.Env) -> tuple[int, int]:
    """(obs_dim, act_dim) of a flat Box env."""
    obs_shape = env.observation_space.shape
    act_shape = env.action_space.shape
    assert obs_shape is not None and act_shape is not None
    return int(np.prod(obs_shape)), int(np.prod(act_shape))


def _time_limit(env: gym.Env) -> TimeLimit | None:
    e: Any = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, TimeLimit):
            return e
        e = e.env
    return None


def get_env_state(env: gym.Env) -> dict[str, Any]:
    """Everything needed to continue the current episode exactly (physics, RNG, time limit)."""
    base = env.unwrapped
    limit = _time_limit(env)
    state: dict[str, Any] = {
        "np_random": copy.deepcopy(base.np_random.bit_generator.state),
        "elapsed_steps": None if limit is None else limit._elapsed_steps,
    }
    if isinstance(base, MujocoEnv):
        # All of MjData, not just qpos/qvel: rewards read derived quantities that lag the state
        # by one step (body positions computed at the start of mj_step, solver warm-starts).
        state["mujoco"] = pickle.dumps(base.data)
    else:
        # Classic-control envs keep their whole dynamic state in plain attributes.
        state["attrs"] = {
            k: copy.deepcopy(getattr(base, k)) for k in ("state", "last_u") if hasattr(base, k)
        }
    return state


def set_env_state(env: gym.Env, state: dict[str, Any]) -> None:
    """Inverse of :func:`get_env_state`; the env must have been reset once before."""
    base = env.unwrapped
    base.np_random.bit_generator.state = state["np_random"]
    limit = _time_limit(env)
    if limit is not None:
        limit._elapsed_steps = state["elapsed_steps"]
    if "mujoco" in state:
        assert isinstance(base, MujocoEnv)
        mujoco.mj_copyData(base.data, base.model, pickle.loads(state["mujoco"]))
    for key, value in state.get("attrs", {}).items():
        setattr(base, key, copy.deepcopy(value))
