"""Several env copies per step (``env.num_envs``): the transitions the buffer gets, the update
count, resume, and bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv

from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.config import ConfigError
from mbrl.envs import env_dims, make_env
from mbrl.envs.vector import CORES_ENV, make_vector_env, own_cores, resolve_vector
from mbrl.runtime.checkpoint import CheckpointError, load
from mbrl.trainer import Trainer

from test_trainer import _assert_same, _comparable, _rows, tiny_config


def _reference(name: str, n: int, seed: int, actions: np.ndarray, limit: int) -> list[dict]:
    """Each copy stepped on its own (copy i seeded seed + i, reset by hand when its episode
    ends): the transitions in the order the collector writes them (step t, copy i)."""
    envs = [make_env(name, limit) for _ in range(n)]
    obs = [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)]
    rows = []
    for t in range(actions.shape[0]):
        for i, env in enumerate(envs):
            nxt, rew, term, trunc, _ = env.step(actions[t, i])
            rows.append({"obs": obs[i], "act": actions[t, i], "rew": rew, "next_obs": nxt,
                         "terminated": term, "truncated": trunc})  # fmt: skip
            obs[i] = env.reset()[0] if term or trunc else nxt
    return rows


@pytest.mark.parametrize(
    ("name", "mode"), [("hopper", "sync"), ("hopper", "async"), ("pendulum", "sync")]
)
def test_collector_rows_match_each_copy_stepped_alone(name: str, mode: str) -> None:
    """Hopper terminates (falls) and truncates; Pendulum only truncates. No row may go from a
    final observation to the next episode's first one."""
    n, steps, limit = 3, 60, 25
    envs = make_vector_env(name, n, mode, max_episode_steps=limit)
    if mode == "sync":
        assert isinstance(envs, SyncVectorEnv)
        obs_dim, act_dim = env_dims(envs.envs[0])
    else:
        obs_dim, act_dim = 11, 3
    buf = ReplayBuffer(n * steps, transition_fields(obs_dim, act_dim))
    collector = Collector(envs, buf, torch.device("cpu"), seed=7)
    gen = torch.Generator().manual_seed(0)
    actions = torch.rand((steps, n, act_dim), generator=gen) * 2 - 1
    it = iter(actions)
    for _ in range(steps):
        collector.step(lambda obs: next(it))
    collector.close()
    ref = _reference(name, n, 7, actions.numpy(), limit)
    rows = buf.rows()
    assert collector.envstep_count == n * steps == rows["obs"].shape[0]
    for key in ("obs", "act", "rew", "next_obs", "terminated", "truncated"):
        expected = torch.as_tensor(np.array([r[key] for r in ref]), dtype=rows[key].dtype)
        assert torch.equal(rows[key], expected), key
    ends = rows["terminated"] | rows["truncated"]
    assert ends.sum() >= n  # every copy ended at least one episode
    if name == "hopper":
        assert rows["terminated"].any()
    else:
        assert not rows["terminated"].any()


def test_n_envs_take_n_times_the_updates(tmp_path: str) -> None:
    """A step of N copies is N env steps followed by N x updates_per_step SAC updates; the
    schedules (eval, log) fire at the first step at or past their multiple."""
    run = os.path.join(tmp_path, "run")
    cfg = tiny_config(**{"env.num_envs": 3, "algorithm.updates_per_step": 2})
    Trainer(cfg, run).run()
    state = load(os.path.join(run, "ckpt", "last.pt"))
    # 400 steps -> 402 (134 steps of 3); updates after init 100: steps 102..402, 3 x 2 each.
    assert state["step"] == 402 and state["updates"] == 101 * 6
    assert len(state["collector"]["envs"]) == 3
    assert [r["step"] for r in _rows(run) if "eval/return_mean" in r] == [201, 402]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_resumed_n_env_run_equals_uninterrupted(tmp_path: str, mode: str) -> None:
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    kw = {"env.num_envs": 2, "env.vector": mode}
    Trainer(tiny_config(**kw), full).run()
    Trainer(tiny_config(total_steps=200, **kw), split).run()
    Trainer(tiny_config(total_steps=400, resume=split, **kw), split).run()
    a, b = load(os.path.join(full, "ckpt", "last.pt")), load(os.path.join(split, "ckpt", "last.pt"))
    _assert_same(a["agent"], b["agent"], "agent")
    # (MjData's pickled bytes include solver scratch memory; the observations and rows decide.)
    own = ("obs", "envstep_count", "episode_count", "ep_return", "ep_len", "finished")
    for key in own:
        assert np.array_equal(np.asarray(a["collector"][key]), np.asarray(b["collector"][key]))
    _assert_same(a["buffers"], b["buffers"], "buffers")
    assert _comparable(_rows(full)) == _comparable(_rows(split))


def test_resume_with_other_num_envs_is_refused(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    Trainer(tiny_config(total_steps=200, **{"env.num_envs": 2}), run).run()
    before = sorted(os.listdir(run)), os.path.getsize(os.path.join(run, "metrics.jsonl"))
    with pytest.raises(CheckpointError, match=r"env.num_envs=2 env copies.*\(got 4\)"):
        Trainer(tiny_config(total_steps=400, resume=run, **{"env.num_envs": 4}), run)
    assert (sorted(os.listdir(run)), os.path.getsize(os.path.join(run, "metrics.jsonl"))) == before


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("env.num_envs", 0, "env.num_envs=0 is not allowed; it must be a positive number"),
        ("env.vector", "threads", "env.vector='threads' is not allowed; choose one of"),
        ("eval.vector", "x", "eval.vector='x' is not allowed"),
    ],
)
def test_bad_vector_settings(key: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        tiny_config(**{key: value})


def test_auto_vector_mode() -> None:
    assert resolve_vector("auto", 1, cores=16) == "sync"
    assert resolve_vector("auto", 8, cores=16) == "async"
    assert resolve_vector("auto", 8, cores=2) == "sync"  # workers would share the cores
    assert resolve_vector("async", 2, cores=2) == "async"


def test_a_runs_own_cores_decide_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs side by side (scripts/seeds.py) each count their share of the cores."""
    monkeypatch.setenv(CORES_ENV, "1")
    assert own_cores() == 1 and resolve_vector("auto", 10) == "sync"
    monkeypatch.setenv(CORES_ENV, "16")
    assert resolve_vector("auto", 10) == "async"
    monkeypatch.delenv(CORES_ENV)
    assert own_cores() == (os.cpu_count() or 1)
    monkeypatch.setenv(CORES_ENV, "half")
    with pytest.raises(ValueError, match="FLOWMBPO_CORES='half' is not allowed; give a whole"):
        own_cores()


def test_episodes_in_progress_survive_a_resume(tmp_path: str) -> None:
    """MBPO's real-data rule (mbpo.real_data=episode) with 2 copies on Pendulum (200-step
    episodes): until step 400 (vector step 200) D_env is empty, so the first model phases and
    SAC updates wait; the checkpoint at step 500 holds each copy's 50-step episode in
    progress, and the resumed run equals the uninterrupted one."""
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    kw = {
        "algorithm.name": "mbpo",
        "env.num_envs": 2,
        "algorithm.init_steps": 200,
        "mbpo.model_train_freq": 100,
        "model.members": 2,
        "model.elites": 1,
        "model.max_epochs": 2,
        "rollout.batch_size": 100,
        "eval.every": 100,
        "eval.episodes": 1,
    }
    Trainer(tiny_config("pendulum", total_steps=700, **kw), full).run()
    Trainer(tiny_config("pendulum", total_steps=500, **kw), split).run()
    held = load(os.path.join(split, "ckpt", "last.pt"))["collector"]["pending"]
    assert [len(rows) for rows in held] == [50, 50]
    Trainer(tiny_config("pendulum", total_steps=700, resume=split, **kw), split).run()
    a, b = load(os.path.join(full, "ckpt", "last.pt")), load(os.path.join(split, "ckpt", "last.pt"))
    _assert_same(a["agent"], b["agent"], "agent")
    _assert_same(a["algorithm"]["model"], b["algorithm"]["model"], "model")
    _assert_same(a["buffers"], b["buffers"], "buffers")
    assert a["buffers"]["real"]["size"] == 400  # 2 finished episodes per copy would be 800

    def rows(run: str) -> list[dict[str, object]]:  # (a fit's wall-clock time differs)
        return [{k: v for k, v in r.items() if k != "model/fit_seconds"} for r in _rows(run)]

    assert _comparable(rows(full)) == _comparable(rows(split))
    fits = [r["step"] for r in _rows(full) if "model/train_rows" in r]
    assert fits[0] == 400  # the phases at 200 and 300 found no finished episode
