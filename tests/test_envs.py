"""Env creation and exact state save/restore (what bit-exact resume relies on)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from gymnasium.spaces import Box
from test_cli import run_started

from mbrl.envs import (
    ENVS,
    RolloutSchedule,
    env_dims,
    env_spec,
    get_env_state,
    make_env,
    mbpo_settings,
    set_env_state,
)

TRAIN = os.path.join(os.path.dirname(__file__), "..", "scripts", "train.py")


@pytest.mark.parametrize("name", sorted(ENVS))  # (an env registered later: here too)
def test_env_state_roundtrip_continues_identically(name: str) -> None:
    env = make_env(name)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(6):
        env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
    state = get_env_state(env)
    shape = env.action_space.shape
    assert shape is not None
    actions = rng.uniform(-1, 1, (8, *shape)).astype(np.float32)
    expected = [env.step(a) for a in actions]
    other = make_env(name)
    other.reset(seed=99)  # a different episode, overwritten by the state
    set_env_state(other, state)
    got = [other.step(a) for a in actions]
    for (o1, r1, t1, u1, _), (o2, r2, t2, u2, _) in zip(expected, got, strict=True):
        np.testing.assert_array_equal(o1, o2)
        assert (r1, t1, u1) == (r2, t2, u2)


def test_actions_are_rescaled_to_unit_box() -> None:
    env = make_env("pendulum")  # Pendulum's own bounds are ±2
    assert isinstance(env.action_space, Box)
    assert env.action_space.low.tolist() == [-1.0] and env.action_space.high.tolist() == [1.0]
    assert env_dims(env) == (3, 1)


def test_an_envs_settings_are_given_by_name() -> None:
    """MBPO's row for an env names each value: no bare tuple of numbers whose order decides."""
    schedule = RolloutSchedule(min_epoch=20, max_epoch=150, min_length=1, max_length=15)
    with pytest.raises(TypeError):
        RolloutSchedule(20, 150, 1, 15)  # type: ignore[call-arg]  # (keyword-only: refused)
    with pytest.raises(TypeError):
        mbpo_settings(20, -1, schedule)  # type: ignore[call-arg]  # (keyword-only: refused)
    row = mbpo_settings(updates_per_step=20, target_entropy=-1, schedule=schedule, retain_epochs=5)
    assert row["rollout"] == {
        "min_epoch": 20, "max_epoch": 150, "min_length": 1, "max_length": 15, "retain_epochs": 5
    }  # fmt: skip
    assert row["algorithm"]["updates_per_step"] == 20 and "mbpo" not in row  # (freq: default)


def test_unknown_env_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="allowed: ant, halfcheetah, hopper"):
        env_spec("nonexistent")


def test_a_missing_gl_backend_is_one_line_before_the_run(tmp_path) -> None:
    """MUJOCO_GL naming a GL library the machine lacks (egl on a bare GPU image) breaks
    `import mujoco`; train.py says so in one line and how to go on, and writes no folder."""
    env = {**os.environ, "MUJOCO_GL": "osmesa"}
    probe = subprocess.run([sys.executable, "-c", "import mujoco"], env=env, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this machine has osmesa: MUJOCO_GL=osmesa imports")
    out = run_started(
        [sys.executable, TRAIN, "env=pendulum", f"hydra.run.dir={tmp_path / 'run'}"],
        env=env,
        timeout=120,
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: MuJoCo could not load"), out.stderr
    assert "MUJOCO_GL=disable" in lines[0]
    assert not (tmp_path / "run").exists()


def test_mujocos_warnings_are_logged_once_and_write_no_file(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A NaN control (a diverged policy under evaluation) makes MuJoCo warn at every episode;
    the warning is logged once per process, and no MUJOCO_LOG.TXT lands in the working folder."""
    from mbrl.envs import make

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(make, "_warned", set())
    env = make_env("hopper", version="v4")
    with caplog.at_level("WARNING", logger="mbrl.envs.make"):
        for episode in range(3):
            env.reset(seed=episode)
            env.step(np.array([np.nan, 0.0, 0.0]))
    assert os.listdir(tmp_path) == []
    assert [r.getMessage() for r in caplog.records] == [
        "MuJoCo: Nan, Inf or huge value in CTRL at ACTUATOR 0. The simulation is unstable. "
        "Time = 0.0000. (said once per process)"
    ]
