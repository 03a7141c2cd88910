"""S SAC agents batched in one (mbrl.agents.seed_batch) against S solo agents: the reference is
each seed's own SAC, updated on the same batches with the same generators."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.agents.seed_batch import SeedBatch, SeedUpdates
from mbrl.bench.update_bench import RealRows

OBS, ACT, B = 11, 3, 64
# Batched matmuls (vmap over the seeds) sum in another order than a solo agent's: after K
# updates the weights agree to float32 rounding, not bit for bit (3e-8 after 50 updates).
ATOL = 1e-6


def solo_agents(seeds: int, **cfg: Any) -> list[SAC]:
    agents = []
    for s in range(seeds):
        torch.manual_seed(s)
        agents.append(SAC(OBS, ACT, SACConfig(batch_size=B, **cfg)))
    return agents


def gens(seeds: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(100 + s) for s in range(seeds)]


def assert_states_close(got: dict, want: dict, atol: float) -> None:
    for key in ("actor", "critic", "critic_target"):
        for name, w in want[key].items():
            torch.testing.assert_close(got[key][name], w, atol=atol, rtol=0, msg=f"{key}.{name}")
    torch.testing.assert_close(got["log_alpha"], want["log_alpha"], atol=atol, rtol=0)
    for i, st in want["opt"]["state"].items():
        for k, v in st.items():
            torch.testing.assert_close(got["opt"]["state"][i][k], v, atol=atol, rtol=0)
    assert torch.equal(got["nonfinite_steps"], want["nonfinite_steps"])


def test_a_batch_starts_as_its_solo_agents_bit_for_bit() -> None:
    agents = solo_agents(3)
    for got, agent in zip(SeedBatch(agents).state_dicts(), agents, strict=True):
        want = agent.state_dict()
        for key in ("actor", "critic", "critic_target"):
            for name, w in want[key].items():
                assert torch.equal(got[key][name], w), f"{key}.{name}"
        assert torch.equal(got["log_alpha"], want["log_alpha"])


@pytest.mark.parametrize("seeds", [1, 3])
def test_updates_match_each_seeds_solo_agent(seeds: int) -> None:
    """K updates of seeds 0..S-1 batched = K updates of each solo agent on its own buffer and
    generator (weights, alpha, Adam's moments and the metrics)."""
    agents = solo_agents(seeds)
    twins = [copy.deepcopy(a) for a in agents]  # (the batch binds its agents' weights)
    batched = SeedUpdates(SeedBatch(agents), [RealRows("cpu", 500) for _ in agents], B, gens(seeds))
    solo = [
        SACUpdates(a, RealRows("cpu", 500), B, g) for a, g in zip(twins, gens(seeds), strict=True)
    ]
    for _ in range(3):
        got = batched(2)
        want = [u(2) for u in solo]
        for s, w in enumerate(want):
            for k, v in w.items():
                torch.testing.assert_close(got[k][s], v, atol=1e-5, rtol=1e-5, msg=k)
    for s, state in enumerate(batched.seed_batch.state_dicts()):
        assert_states_close(state, twins[s].state_dict(), ATOL)


def test_a_seeds_state_loads_into_a_solo_agent_that_goes_on_alike() -> None:
    """A seed's state dict is a SAC checkpoint: a solo agent loaded from it and a batch
    rebuilt from such agents continue as the original batch does."""
    batch = SeedBatch(solo_agents(2))
    rows = [RealRows("cpu", 500) for _ in range(2)]
    SeedUpdates(batch, rows, B, gens(2))(3)
    loaded = solo_agents(2)
    for agent, state in zip(loaded, batch.state_dicts(), strict=True):
        agent.load_state_dict(state)
    again = SeedBatch(loaded)
    for got, want in zip(again.state_dicts(), batch.state_dicts(), strict=True):
        assert_states_close(got, want, 0.0)
    SeedUpdates(batch, rows, B, gens(2))(2)
    SeedUpdates(again, rows, B, gens(2))(2)
    for got, want in zip(again.state_dicts(), batch.state_dicts(), strict=True):
        assert_states_close(got, want, 0.0)


def test_a_nonfinite_seed_takes_no_gradient_and_the_others_go_on() -> None:
    agents = solo_agents(3)
    twins = [copy.deepcopy(a) for a in agents]
    batch = SeedBatch(agents)
    rows = [RealRows("cpu", 500) for _ in range(3)]
    data = {
        k: torch.stack([r.batch(B, torch.Generator().manual_seed(1))[k] for r in rows])
        for k in ("obs", "act", "rew", "next_obs", "terminated")
    }
    data["rew"][1, 0] = float("nan")
    metrics = batch.update(data, gens(3))
    assert metrics["nonfinite_steps"].tolist() == [0, 1, 0]
    states = batch.state_dicts()
    for s in (0, 2):
        twin_batch = {k: v[s] for k, v in data.items()}
        twins[s].update(twin_batch, gens(3)[s])
        assert_states_close(states[s], twins[s].state_dict(), ATOL)
    # Seed 1: a zero gradient (GuardedStep's way without a fused optimizer): Adam's first
    # step from zero moments leaves the weights where they were.
    for name, w in twins[1].state_dict()["actor"].items():
        torch.testing.assert_close(states[1]["actor"][name], w, atol=0, rtol=0)


def test_each_agent_reads_its_seeds_current_weights() -> None:
    """After batched updates, the solo agents (bound to the batch) act with their seed's new
    weights: what acting, model rollouts and evaluation read."""
    agents = solo_agents(2)
    batch = SeedBatch(agents)
    before = agents[1].actor.linears[0].weight.clone()
    SeedUpdates(batch, [RealRows("cpu", 500) for _ in agents], B, gens(2))(2)
    assert not torch.equal(agents[1].actor.linears[0].weight, before)
    for agent, state in zip(agents, batch.state_dicts(), strict=True):
        for name, w in agent.actor.state_dict().items():
            assert torch.equal(w, state["actor"][name]), name
        assert torch.equal(agent.log_alpha, state["log_alpha"])
    obs = torch.randn(2, 4, OBS, generator=torch.Generator().manual_seed(3))
    for s, agent in enumerate(agents):
        want = agent.act(obs[s], True, None)  # (a solo matmul: rounding apart)
        torch.testing.assert_close(batch.act(obs, True, None)[s], want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("deterministic", [True, False])
def test_actions_are_each_seeds_solo_actions(deterministic: bool) -> None:
    agents = solo_agents(3)
    twins = [copy.deepcopy(a) for a in agents]
    obs = torch.randn(3, 5, OBS, generator=torch.Generator().manual_seed(7))
    got = SeedBatch(agents).act(obs, deterministic, gens(3))
    for s, (agent, g) in enumerate(zip(twins, gens(3), strict=True)):
        torch.testing.assert_close(got[s], agent.act(obs[s], deterministic, g), atol=1e-6, rtol=0)


def test_seeds_that_differ_in_more_than_the_seed_are_refused() -> None:
    with pytest.raises(ValueError, match="seeds differ in seed only"):
        SeedBatch([*solo_agents(1), *solo_agents(1, gamma=0.9)])
    with pytest.raises(ValueError, match="amp=fp16 is not supported"):
        SeedBatch([SAC(OBS, ACT, SACConfig(), "cpu", amp="fp16")])
    with pytest.raises(ValueError, match="2 generators for 3 seeds"):
        SeedBatch(solo_agents(3)).act(torch.zeros(3, 1, OBS), False, gens(2))
    with pytest.raises(ValueError, match="one of each per seed"):
        SeedUpdates(SeedBatch(solo_agents(2)), [RealRows("cpu", 100)], B, gens(2))
