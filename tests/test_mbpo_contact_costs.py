"""env.version=v4's Ant and Humanoid give MBPO's own rewards and observations.

MBPO trains on envs of its own, ``mbpo/env/ant.py`` (AntTruncatedObsEnv) and
``mbpo/env/humanoid.py`` (HumanoidTruncatedObsEnv), on MuJoCo 1.50, which fills ``cfrc_ext``;
both rewards subtract a contact cost. Each test here recomputes MBPO's reward from the
simulator's state with MBPO's own formula, written out below rather than taken from the
project's code, and compares it with the reward of the env that ``make_env`` builds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

from mbrl.envs import env_spec, make_env

STEPS = 200


def _ant_reward(data: Any, x_before: float, action: np.ndarray, dt: float) -> tuple[float, float]:
    """mbpo/env/ant.py's step: (reward, contact_cost)."""
    forward_reward = (data.body("torso").xpos[0] - x_before) / dt
    ctrl_cost = 0.5 * np.square(action).sum()
    contact_cost = 0.5 * 1e-3 * np.sum(np.square(np.clip(data.cfrc_ext, -1, 1)))
    survive_reward = 1.0
    return forward_reward - ctrl_cost - contact_cost + survive_reward, contact_cost


def _ant_done(data: Any) -> bool:
    state = np.concatenate([data.qpos, data.qvel])
    notdone = np.isfinite(state).all() and 0.2 <= state[2] <= 1.0
    return not notdone


def _mass_center(model: Any, data: Any) -> float:
    """mbpo/env/humanoid.py's mass_center(model, sim)."""
    mass = np.expand_dims(model.body_mass, 1)
    return float((np.sum(mass * data.xipos, 0) / np.sum(mass))[0])


def _humanoid_reward(model: Any, data: Any, before: float) -> tuple[float, float]:
    """mbpo/env/humanoid.py's step: (reward, quad_impact_cost)."""
    alive_bonus = 5.0
    lin_vel_cost = 0.25 * (_mass_center(model, data) - before) / model.opt.timestep
    quad_ctrl_cost = 0.1 * np.square(data.ctrl).sum()
    quad_impact_cost = min(0.5e-6 * np.square(data.cfrc_ext).sum(), 10)
    return lin_vel_cost - quad_ctrl_cost - quad_impact_cost + alive_bonus, quad_impact_cost


def _humanoid_done(data: Any) -> bool:
    return bool(data.qpos[2] < 1.0 or data.qpos[2] > 2.0)


def _own_action(model: Any, action: np.ndarray) -> np.ndarray:
    """The agent's [-1, 1] action in the env's own bounds (the actuators' ctrlrange)."""
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    return low + (action + 1.0) * 0.5 * (high - low)


def _check_obs(obs: np.ndarray, data: Any, dims: int) -> None:
    """MBPO's truncated observation: concatenate(qpos[2:], qvel), nothing else."""
    assert obs.shape == (dims,)
    np.testing.assert_array_equal(obs, np.concatenate([data.qpos.flat[2:], data.qvel.flat]))


@pytest.mark.parametrize("env", ["ant", "humanoid"])
def test_v4_reward_and_observation_are_mbpos(env: str) -> None:
    """Seeded random actions over several episodes: each step's reward equals MBPO's formula
    on the simulator's state, its termination MBPO's rule, its observation qpos[2:], qvel;
    the contact term is well above the comparison's tolerance on many steps, so a reward
    without it fails."""
    e = make_env(env, version="v4")
    base: Any = e.unwrapped
    model, data = base.model, base.data
    rng = np.random.default_rng(0)
    obs, _ = e.reset(seed=0)
    dims = 27 if env == "ant" else 45
    _check_obs(obs, data, dims)
    contact, episodes = [], 1
    for step in range(STEPS):
        action = rng.uniform(-1, 1, e.action_space.shape)
        before = data.body("torso").xpos[0] if env == "ant" else _mass_center(model, data)
        obs, reward, terminated, truncated, _ = e.step(action)
        own = _own_action(model, action)
        np.testing.assert_allclose(data.ctrl, own, rtol=0, atol=1e-12)  # MBPO's a is the ctrl
        if env == "ant":
            assert base.dt == pytest.approx(5 * model.opt.timestep)
            expected, cost = _ant_reward(data, before, own, base.dt)
            assert terminated == _ant_done(data)
        else:
            expected, cost = _humanoid_reward(model, data, before)
            assert terminated == _humanoid_done(data)
        assert float(reward) == pytest.approx(expected, rel=1e-6, abs=1e-9), step
        _check_obs(obs, data, dims)
        contact.append(cost)
        if terminated or truncated:
            obs, _ = e.reset(seed=step + 1)
            _check_obs(obs, data, dims)
            episodes += 1
    contact_costs = np.array(contact)
    assert episodes > 1  # the terminating steps, and the first steps after a reset, are in
    assert (contact_costs > 1e-4).sum() >= 20 and contact_costs.max() > 1e-3, contact_costs.max()


@pytest.mark.parametrize("env", ["ant", "humanoid"])
def test_v4_reports_its_contact_cost(env: str) -> None:
    """The term make_env subtracts on v4 is reported as v5 reports its own: the reward is the
    sum of the info's reward terms, reward_contact included; the env's own observation (what
    its _get_obs returns) is v4's default, without the contact forces (Ant: 27 dims; Humanoid:
    376, cut to 45 by make_env)."""
    e = make_env(env, version="v4")
    e.reset(seed=0)
    assert e.unwrapped.observation_space.shape == ({"ant": 27, "humanoid": 376}[env],)
    rng = np.random.default_rng(1)
    seen = []
    for _ in range(40):
        _, reward, terminated, truncated, info = e.step(rng.uniform(-1, 1, e.action_space.shape))
        terms = [k for k in info if k.startswith("reward_")]
        assert reward == pytest.approx(sum(info[k] for k in terms), rel=1e-12)
        seen.append(info["reward_contact"])
        if terminated or truncated:
            break
    assert max(seen) <= 0 and min(seen) < 0


def test_v5_is_unchanged() -> None:
    """v5 (the default) keeps gymnasium's own arguments, observation cut and reward: no cost is
    added on top of the contact cost v5 already charges (its reward is its info's terms)."""
    flags = {
        "ant": (("include_cfrc_ext_in_observation", False),),
        "humanoid": (
            ("include_cinert_in_observation", False),
            ("include_cvel_in_observation", False),
            ("include_qfrc_actuator_in_observation", False),
            ("include_cfrc_ext_in_observation", False),
        ),
    }
    for env, dims in (("ant", 27), ("humanoid", 45)):
        version = env_spec(env).version("v5")
        assert version == env_spec(env).version()  # still the default
        assert version.gym_id == f"{env.capitalize()}-v5" and version.kwargs == flags[env]
        assert version.obs_dims is None and version.contact_cost is None
        e = make_env(env)
        base = e.unwrapped
        assert isinstance(base, MujocoEnv)
        assert e.observation_space.shape == (dims,)
        obs, _ = e.reset(seed=0)
        _check_obs(obs, base.data, dims)
        rng = np.random.default_rng(2)
        for _ in range(10):
            obs, reward, terminated, truncated, info = e.step(
                rng.uniform(-1, 1, e.action_space.shape)
            )
            _check_obs(obs, base.data, dims)
            terms = [k for k in info if k.startswith("reward_")]
            assert "reward_contact" in terms
            assert reward == pytest.approx(sum(info[k] for k in terms), rel=1e-12)
            if terminated or truncated:
                break
