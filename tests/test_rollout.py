"""Rollouts into the model pool: termination, non-finite rows, rewarder modes, no syncs."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import torch

from mbrl.agents import SAC, SACConfig
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.config import Config, FlowConfig, RewarderConfig
from mbrl.envs import env_spec
from mbrl.models import DynamicsModel
from mbrl.rewarder import Rewarder
from mbrl.rollout import rollout
from mbrl.schedule import pool_capacity

from tests_support import tiny_model_config

OBS, ACT = 11, 3  # Hopper's sizes, with its real termination function


def _setup(capacity: int = 4000) -> tuple[DynamicsModel, SAC, ReplayBuffer]:
    torch.manual_seed(0)
    model = DynamicsModel(OBS, ACT, tiny_model_config(members=3, elites=2))
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[16]))
    fields = {**transition_fields(OBS, ACT), "score": ((), torch.float32)}
    return model, agent, ReplayBuffer(capacity, fields)


def _start(n: int) -> torch.Tensor:
    obs = torch.zeros(n, OBS)
    obs[:, 0] = 1.25  # healthy height; half the rows start with the torso tilted too far
    obs[n // 2 :, 1] = 50.0
    return obs


def test_rows_stop_at_termination_and_pool_gets_the_rest(host_reads: list[str]) -> None:
    model, agent, pool = _setup()
    term = env_spec("hopper").termination_fn
    out = rollout(model, agent, term, _start(100), 4, pool, torch.Generator().manual_seed(0))
    assert host_reads == []  # the whole rollout is sync-free
    written = int(out["rollout/transitions"])
    assert written == len(pool)
    # Tilted rows terminate at their first step; some healthy rows may fall later.
    assert 50 + 50 <= written <= 50 + 4 * 50
    rows = pool.rows()
    assert bool(rows["terminated"][rows["obs"][:, 1] == 50.0].all())
    assert float(out["rollout/alive_at_end"]) <= 0.5


def test_nonfinite_predictions_are_dropped() -> None:
    model, agent, pool = _setup()
    with torch.no_grad():
        model.ensemble.base.bias[model.elites[0]] = float("nan")  # one elite predicts NaN
    never = env_spec("halfcheetah").termination_fn
    out = rollout(model, agent, never, _start(60), 3, pool, torch.Generator().manual_seed(0))
    assert int(out["rollout/nonfinite"]) > 0
    assert int(out["rollout/transitions"]) == len(pool) < 60 * 3
    rows = pool.rows()
    assert all(bool(torch.isfinite(v.float()).all()) for v in rows.values())


def test_rewarder_penalty_and_filter() -> None:
    never = env_spec("halfcheetah").termination_fn
    model, agent, pool = _setup()
    rewarder = Rewarder(
        OBS, ACT, RewarderConfig(flow=FlowConfig(layers=1, hidden=[8])), torch.device("cpu")
    )
    with torch.no_grad():  # make p1 != p2 so that scores are non-zero
        for p in rewarder.flows.p1.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    start = _start(50)
    plain = rollout(model, agent, never, start, 1, pool, torch.Generator().manual_seed(0))
    base = pool.rows()["rew"].clone()
    pen = RewarderConfig(mode="penalty", penalty=2.0)
    _, _, pool2 = _setup()
    rollout(model, agent, never, start, 1, pool2, torch.Generator().manual_seed(0), rewarder, pen)
    rows = pool2.rows()
    torch.testing.assert_close(rows["rew"], base - 2.0 * rows["score"])
    assert rows["score"].abs().sum() > 0
    threshold = float(rows["score"].median())
    _, _, pool3 = _setup()
    filt = RewarderConfig(mode="filter", threshold=threshold)
    out = rollout(
        model, agent, never, start, 1, pool3, torch.Generator().manual_seed(0), rewarder, filt
    )
    kept = pool3.rows()["score"]
    assert bool((kept <= threshold).all()) and 0 < len(pool3) < int(plain["rollout/transitions"])
    assert int(out["rollout/filtered"]) == 50 - len(pool3)


def test_pool_is_allocated_once_for_the_longest_rollouts() -> None:
    cfg = Config()
    cfg.rollout.batch_size, cfg.rollout.max_length, cfg.rollout.retain_epochs = 100, 15, 2
    cfg.mbpo.epoch_length, cfg.mbpo.model_train_freq = 1000, 250
    assert pool_capacity(cfg) == 2 * 4 * 100 * 15
    model, agent, pool = _setup(capacity=300)
    ptrs = {k: v.data_ptr() for k, v in pool.data.items()}
    never = env_spec("halfcheetah").termination_fn
    for length in (1, 3, 5):  # growing rollouts wrap the ring, never reallocate it
        rollout(
            model, agent, never, _start(40), length, pool, torch.Generator().manual_seed(length)
        )
    assert {k: v.data_ptr() for k, v in pool.data.items()} == ptrs and len(pool) == 300


def test_rollouts_act_with_the_stochastic_policy() -> None:
    """MBPO rolls its model out with the SAC policy's samples, not its mean: from one start
    state, the first actions are tanh(mean + std * N(0, 1)) of the actor's own mean and std
    there (computed here from its outputs), with the spread that implies."""
    model, agent, pool = _setup(capacity=20_000)
    never = env_spec("halfcheetah").termination_fn
    start = (0.05 * torch.randn(1, OBS)).expand(20_000, OBS).clone()  # (a std near 1 there)
    rollout(model, agent, never, start, 1, pool, torch.Generator().manual_seed(0))
    pre = torch.atanh(pool.rows()["act"].clamp(-1 + 1e-6, 1 - 1e-6))  # back before the tanh
    with torch.no_grad():
        mean, log_std = agent.actor(start[:1])
    torch.testing.assert_close(pre.mean(0), mean[0], atol=0.05, rtol=0.0)
    torch.testing.assert_close(pre.std(0), log_std.exp()[0], atol=0.0, rtol=0.05)
    assert float(log_std.exp().min()) > 0.1  # (a spread the mean alone could not show)


class _Drift:
    """A dynamics stand-in whose prediction is a fixed function of (obs, act): each step tilts
    the torso by 0.03 + 0.02 x the first action, so rows fall (|angle| >= 0.2) after different
    numbers of steps, and MBPO's compacted batch can be replayed row for row."""

    def sample(self, obs: torch.Tensor, act: torch.Tensor, generator: torch.Generator) -> Any:
        step = torch.zeros_like(obs)
        step[:, 1] = 0.03 + 0.02 * act[:, 0]
        step[:, 2:] = 0.1 * obs[:, 2:].sin() + 0.01
        return obs + step, obs[:, 0] + act.sum(-1)


class _Policy:
    """A policy stand-in: the action a fixed function of the observation."""

    def act(self, obs: torch.Tensor, deterministic: bool, generator: Any) -> torch.Tensor:
        return torch.tanh(obs[:, 1:4] * 3.0 + 0.2)


def _mbpos_rollout(
    obs: np.ndarray, length: int, term: Any
) -> tuple[dict[str, np.ndarray], list[int]]:
    """MBPO's ``_rollout_model`` (mbpo/algorithms/mbpo.py), transcribed: each step's rows go to
    the pool, terminated ones included; only the others go on (``obs = next_obs[nonterm_mask]``),
    and the loop breaks once none is left. Also its ``steps_added``: the rows of each step."""
    added: dict[str, list[np.ndarray]] = {
        "obs": [],
        "act": [],
        "rew": [],
        "next_obs": [],
        "terminated": [],
    }
    steps_added = []
    model, policy = _Drift(), _Policy()
    for _ in range(length):
        o = torch.from_numpy(obs)
        act = policy.act(o, False, None)
        next_obs, rew = model.sample(o, act, torch.Generator())
        done = term(o, act, next_obs).numpy()
        for key, v in zip(added, (o, act, rew, next_obs), strict=False):
            added[key].append(v.numpy())
        added["terminated"].append(done)
        steps_added.append(len(obs))
        nonterm = ~done
        if nonterm.sum() == 0:
            break
        obs = next_obs.numpy()[nonterm]
    return {k: np.concatenate(v) for k, v in added.items()}, steps_added


def test_multistep_rollouts_write_what_mbpos_rollout_model_writes() -> None:
    """Each step starts from the row's predicted next observation; a row that terminates is
    written once, with its flag, and never again; the rows in the pool are MBPO's, in its order
    (its batch compacted, ours masked: the same rows in the same order)."""
    term = env_spec("hopper").termination_fn
    n, length = 64, 10
    start = torch.zeros(n, OBS)
    start[:, 0] = 1.25
    start[:, 1] = torch.linspace(-0.5, 0.19, n)  # 29 fall at once, most others later
    start[:, 2:] = torch.linspace(-1.0, 1.0, OBS - 2)
    fields = {**transition_fields(OBS, ACT), "score": ((), torch.float32)}
    pool = ReplayBuffer(n * length, fields)
    model, agent = cast(DynamicsModel, _Drift()), cast(SAC, _Policy())
    out = rollout(model, agent, term, start, length, pool, torch.Generator().manual_seed(0))
    from test_termination import _mbpo_hopper  # MBPO's static/hopper.py, transcribed

    def mbpos_term(o: torch.Tensor, a: torch.Tensor, next_o: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(_mbpo_hopper(next_o.numpy()))

    want, added = _mbpos_rollout(start.numpy(), length, mbpos_term)
    rows = pool.rows()
    assert int(out["rollout/transitions"]) == len(pool) == len(want["obs"])
    for key, value in want.items():
        np.testing.assert_allclose(rows[key].numpy(), value, rtol=0, atol=1e-6, err_msg=key)
    # The premise: rows fell after many different numbers of steps, and some lasted all ten.
    assert len(added) == length and added[-1] > 0 and len(set(added)) >= 6, added
