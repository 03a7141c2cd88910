"""Each batched termination function agrees with the real env's ``terminated`` flag; an env
whose random episodes never end must end no state far from theirs either (it cannot terminate)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv

from mbrl.envs import ENVS, env_spec, make_env


def _collect(
    name: str, steps: int, seed: int = 0, version: str | None = None
) -> tuple[np.ndarray, ...]:
    env = make_env(name, version=version)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []
    for t in range(steps):
        act = rng.uniform(-1, 1, size=env.action_space.shape).astype(np.float32)
        if name == "ant" and t % 25 == 24:
            _lift(env)  # put the torso outside the healthy z-range so the real env terminates
            base: Any = env.unwrapped  # (the env's own _get_obs: not in gymnasium's types)
            obs = base._get_obs()
        next_obs, _, term, trunc, _ = env.step(act)
        rows.append((obs, act, next_obs, bool(term)))
        obs = env.reset()[0] if term or trunc else next_obs
    env.close()
    return tuple(np.stack([r[i] for r in rows]) for i in range(4))


def _lift(env) -> None:
    base = env.unwrapped
    assert isinstance(base, MujocoEnv)
    qpos, qvel = base.data.qpos.copy(), base.data.qvel.copy()
    qpos[2] = 1.5
    base.set_state(qpos, qvel)


VERSIONS = [(name, version) for name in sorted(ENVS) for version, _ in ENVS[name].versions]


@pytest.mark.parametrize(("name", "version"), VERSIONS)
def test_termination_matches_env(name: str, version: str) -> None:
    """Every version of every env (v4 too: the termination rules are the same code)."""
    obs, act, next_obs, terminated = _collect(name, steps=300, version=version)
    fn = env_spec(name).termination_fn
    pred = fn(torch.as_tensor(obs), torch.as_tensor(act), torch.as_tensor(next_obs)).numpy()
    assert pred.dtype == np.bool_ and pred.shape == terminated.shape
    np.testing.assert_array_equal(pred, terminated)
    if terminated.any():  # the env ends episodes (by itself, or pushed: ant)
        assert not terminated.all(), "need both kinds of transitions"
    else:  # none ended: the env never terminates, or the episodes missed its states
        assert not _fires_far_away(name, obs, act), (
            f"{name}: random episodes never terminated, but its termination function fires "
            "on states far from theirs: make _collect push the env into such states (as ant)"
        )


def test_an_env_that_can_terminate_is_told_from_one_that_cannot() -> None:
    """What decides, for a new env, whether its episodes had to show terminations: a few
    steps of Hopper (none ended yet) are caught, HalfCheetah and Pendulum never end."""
    for name, can in [("hopper", True), ("halfcheetah", False), ("pendulum", False)]:
        obs, act, _, terminated = _collect(name, steps=10)
        assert not terminated.any()
        assert _fires_far_away(name, obs, act) == can, name


def _fires_far_away(name: str, obs: np.ndarray, act: np.ndarray) -> bool:
    """Whether the env's termination function ends any state far outside the episodes'
    ``obs``: each entry scaled up to 1000x and shifted on its own, where a rule on a body's
    height, an angle or a state bound would fire. No env-specific list: the function
    itself says whether the env can terminate."""
    gen = torch.Generator().manual_seed(0)
    o = torch.as_tensor(obs[:200])
    scale = 10 ** torch.randint(0, 4, o.shape, generator=gen)
    far = o * scale + torch.randn(o.shape, generator=gen) * scale
    return bool(env_spec(name).termination_fn(far, torch.as_tensor(act[:200]), far).any())


def test_termination_is_batched_and_checks_shapes() -> None:
    fn = env_spec("hopper").termination_fn
    obs = torch.zeros(5, 11)
    obs[:, 0] = torch.tensor([1.2, 0.5, 1.2, 1.2, 1.2])  # z: second row too low
    obs[:, 1] = torch.tensor([0.0, 0.0, 0.3, -0.1, 0.0])  # angle: third row too large
    obs[4, 7] = 150.0  # a state entry outside (-100, 100)
    out = fn(obs, torch.zeros(5, 3), obs)
    assert out.tolist() == [False, True, True, False, True]
    with pytest.raises(ValueError, match="obs/next_obs"):
        fn(torch.zeros(5, 11), torch.zeros(5, 3), torch.zeros(4, 11))
