"""SAC: distribution math, batched twin critics, update semantics, no host syncs, AMP."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch import nn
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from mbrl.agents.networks import TwinQ
from mbrl.agents.sac import SAC, SACConfig
from mbrl.buffer import random_transitions

from tests_support import ensemble_linears

OBS, ACT, B = 5, 2, 32


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    return random_transitions(B, OBS, ACT, torch.Generator().manual_seed(seed))


def _critic(sac: SAC) -> TwinQ:
    """SAC's critic, typed (the base class builds TwinQ)."""
    assert isinstance(sac.critic, TwinQ)
    return sac.critic


def _sac(**kw: Any) -> SAC:
    torch.manual_seed(0)
    return SAC(OBS, ACT, SACConfig(hidden_sizes=[32, 32], **kw))


def test_log_prob_matches_torch_tanh_normal() -> None:
    sac = _sac()
    obs = torch.randn(64, OBS)
    gen = torch.Generator().manual_seed(3)
    act, log_prob = sac.actor.sample(obs, gen)
    mean, log_std = sac.actor(obs)
    ref = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform(cache_size=1)])
    expected = ref.log_prob(act.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    assert act.abs().max() < 1.0
    # Away from the tanh saturation both formulas agree closely.
    ok = act.abs().max(dim=-1).values < 0.99
    torch.testing.assert_close(log_prob[ok], expected[ok], rtol=1e-4, atol=1e-4)


def test_twin_critics_are_two_independent_mlps() -> None:
    sac = _sac()
    obs, act = torch.randn(7, OBS), torch.rand(7, ACT)
    q = sac.critic(obs, act)
    assert q.shape == (2, 7)
    x = torch.cat([obs, act], -1)
    layers = ensemble_linears(_critic(sac).net)
    for member in range(2):
        h = x
        for i, layer in enumerate(layers):
            h = h @ layer.weight[member] + layer.bias[member]
            h = torch.relu(h) if i < len(layers) - 1 else h
        torch.testing.assert_close(q[member], h.squeeze(-1))


def test_update_trains_all_nets_and_lerps_target() -> None:
    sac = _sac()
    before = copy.deepcopy(sac.state_dict())
    metrics = sac.update(_batch(), torch.Generator().manual_seed(0))
    assert set(metrics) == {
        "q_loss",
        "actor_loss",
        "alpha_loss",
        "alpha",
        "q_mean",
        "entropy",
        "nonfinite_steps",
    }
    assert all(isinstance(v, torch.Tensor) and not v.requires_grad for v in metrics.values())
    for name in ("actor", "critic"):
        for key, old in before[name].items():
            assert not torch.equal(old, getattr(sac, name).state_dict()[key]), (
                f"{name}.{key} did not move"
            )
    assert not torch.equal(before["log_alpha"], sac.log_alpha.detach())
    tau = sac.cfg.tau
    assert sac.critic_target is not None
    for key, old_target in before["critic_target"].items():
        expected = old_target + tau * (sac.critic.state_dict()[key] - old_target)
        torch.testing.assert_close(sac.critic_target.state_dict()[key], expected)


@pytest.mark.parametrize("loss_index,net", [(0, "critic"), (1, "actor"), (2, "alpha")])
def test_each_loss_moves_only_its_own_parameters(loss_index: int, net: str) -> None:
    """The joint update's gradients equal each loss's own gradients, taken alone (the update
    leaves them in ``.grad``)."""
    sac, ref = _sac(), _sac()
    b = _batch()
    noise = torch.randn((2, B, ACT), generator=torch.Generator().manual_seed(0))
    sac.update(b, torch.Generator().manual_seed(0))  # the same noise: first draw of seed 0
    out = ref.losses(b["obs"], b["act"], b["rew"], b["next_obs"], b["terminated"], noise)
    loss = out[loss_index]
    assert isinstance(loss, torch.Tensor)
    loss.backward()

    def params(agent: SAC) -> list[torch.Tensor]:
        if net == "alpha":
            return [agent.log_alpha]
        return list(getattr(agent, net).parameters())

    for p, q in zip(params(sac), params(ref), strict=True):
        assert q.grad is not None and p.grad is not None
        torch.testing.assert_close(p.grad, q.grad)
    others = [
        p for name in ("critic", "actor") if name != net for p in getattr(ref, name).parameters()
    ]
    others += [] if net == "alpha" else [ref.log_alpha]
    assert all(p.grad is None for p in others), "a loss reached another network's weights"


def test_update_never_syncs(host_reads: list[str]) -> None:
    sac = _sac()
    calls = host_reads
    for _ in range(3):
        sac.update(_batch(), torch.Generator().manual_seed(0))
    assert calls == []
    sac.act(torch.zeros(1, OBS), deterministic=False, generator=None).cpu()
    assert len(calls) == 0  # .cpu() here is the test's own call, not the package's


def test_spy_sees_package_syncs(host_reads: list[str]) -> None:
    from mbrl.runtime.logger import to_numbers

    calls = host_reads
    to_numbers({"a": torch.tensor(1.0)})
    assert calls and "tolist" in calls[0]


def test_terminated_cuts_the_bootstrap_but_truncated_does_not() -> None:
    sac = _sac(gamma=0.9)
    b, noise, alpha = _batch(), torch.randn(B, ACT), torch.tensor(0.1)
    b["terminated"][:] = True
    target = sac.target_q(b["rew"], b["next_obs"], b["terminated"], alpha, noise)
    torch.testing.assert_close(target, b["rew"])
    b["terminated"][:], b["truncated"][:] = False, True
    target = sac.target_q(b["rew"], b["next_obs"], b["terminated"], alpha, noise)
    next_act, next_logp = sac.actor.squash(b["next_obs"], noise)
    assert sac.critic_target is not None
    q_next = sac.critic_target(b["next_obs"], next_act).min(0).values
    torch.testing.assert_close(target, b["rew"] + 0.9 * (q_next - alpha * next_logp))
    # The update reads the batch whole: a truncated row must train as the same row not truncated.
    agents = [copy.deepcopy(sac) for _ in range(2)]
    for agent, truncated in zip(agents, (False, True), strict=True):
        b["truncated"][:] = truncated
        agent.update(b, torch.Generator().manual_seed(1))
    params = [[*a.critic.parameters(), *a.actor.parameters()] for a in agents]
    for p, q in zip(*params, strict=True):
        assert torch.equal(p, q)
    first = [ensemble_linears(_critic(a).net)[0].weight for a in (agents[0], sac)]
    assert not torch.equal(*first)


def test_state_dict_roundtrip_gives_identical_updates() -> None:
    a = _sac()
    a.update(_batch(), torch.Generator().manual_seed(0))
    b = SAC(OBS, ACT, SACConfig(hidden_sizes=[32, 32]))
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    ma = a.update(_batch(1), torch.Generator().manual_seed(5))
    mb = b.update(_batch(1), torch.Generator().manual_seed(5))
    for key in ma:
        assert torch.equal(ma[key], mb[key])


def test_every_checkpoint_saves_the_current_adam_step_count() -> None:
    """A run checkpoints before its first update and then again: each state dict must carry
    the step count of its own moment (saving must not detach the live count), and an agent
    loaded from a later one continues exactly like the original."""
    a = _sac()
    first = copy.deepcopy(a.state_dict())  # before any update (as a run's first checkpoint)
    for i in range(3):
        a.update(_batch(i), torch.Generator().manual_seed(i))
    later = copy.deepcopy(a.state_dict())
    assert all(float(v["step"]) == 0 for v in first["opt"]["state"].values())
    assert all(float(v["step"]) == 3 for v in later["opt"]["state"].values())
    a.update(_batch(3), torch.Generator().manual_seed(3))
    assert all(float(v["step"]) == 4 for v in a.state_dict()["opt"]["state"].values())
    b = SAC(OBS, ACT, SACConfig(hidden_sizes=[32, 32]))
    b.load_state_dict(later)
    b.update(_batch(3), torch.Generator().manual_seed(3))
    for key, value in a.actor.state_dict().items():
        assert torch.equal(value, b.actor.state_dict()[key]), key


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_amp_update_is_finite_and_moves(amp: str) -> None:
    sac = SAC(OBS, ACT, SACConfig(hidden_sizes=[32, 32]), amp=amp)
    before = copy.deepcopy(sac.critic.state_dict())
    for seed in range(5):  # (fp16's loss scale starts high: its first steps may be skipped)
        metrics = sac.update(_batch(seed), torch.Generator().manual_seed(seed))
    assert all(torch.isfinite(v) for v in metrics.values())
    layers = ensemble_linears(_critic(sac).net)
    assert layers[0].weight.dtype == torch.float32  # master weights stay fp32
    assert not torch.equal(before["net.layers.1.weight"], layers[1].weight)


def test_sac_solves_a_one_step_bandit() -> None:
    """Reward -(a - 0.5)^2 and terminal: the mean action must move to 0.5 (from the wide
    initial policy of softlearning's clipped log-std, std ~ 1, in 800 updates)."""
    torch.manual_seed(0)
    sac = SAC(
        1, 1, SACConfig(hidden_sizes=[32, 32], init_alpha=0.01, actor_lr=3e-3, critic_lr=3e-3)
    )
    gen = torch.Generator().manual_seed(0)
    for _ in range(800):
        obs = torch.zeros(64, 1)
        act = sac.act(obs, deterministic=False, generator=gen)
        batch = {
            "obs": obs,
            "act": act,
            "rew": -(act[:, 0] - 0.5).square(),
            "next_obs": obs,
            "terminated": torch.ones(64, dtype=torch.bool),
            "truncated": torch.zeros(64, dtype=torch.bool),
        }
        sac.update(batch, gen)
    greedy = sac.act(torch.zeros(1, 1), deterministic=True, generator=None)
    assert abs(greedy.item() - 0.5) < 0.1


def test_mlp_layers_are_plain_linear() -> None:
    sac = _sac()
    assert isinstance(sac.actor.net[0], nn.Linear)


def test_nonfinite_batch_is_contained(host_reads: list[str]) -> None:
    sac = _sac()
    bad = _batch()
    bad["rew"][3] = float("nan")
    before = copy.deepcopy(sac.critic.state_dict())
    metrics = sac.update(bad, torch.Generator().manual_seed(0))
    assert host_reads == []
    assert int(metrics["nonfinite_steps"]) >= 1
    for key, value in sac.critic.state_dict().items():
        assert torch.isfinite(value).all(), key
        torch.testing.assert_close(value, before[key])  # zero grads at Adam's first step
    for group in sac.opt.param_groups:
        for p in group["params"]:
            state = sac.opt.state[p]
            assert all(torch.isfinite(state[k]).all() for k in ("exp_avg", "exp_avg_sq"))
            assert int(state["step"]) == 0  # the skipped step is not counted by Adam
    sac.update(_batch(1), torch.Generator().manual_seed(0))  # training goes on
    assert all(torch.isfinite(p).all() for p in sac.critic.parameters())


def test_compiled_update_matches_eager() -> None:
    """compile=True runs the same losses through torch.compile (CPU inductor here): forward
    and backward compiled, the same updates up to float rounding."""
    cfg = SACConfig(hidden_sizes=[32, 32])
    torch.manual_seed(0)
    eager = SAC(OBS, ACT, cfg)
    torch.manual_seed(0)
    compiled = SAC(OBS, ACT, cfg, compile=True)
    assert compiled.warm_up() is compiled.compiled and compiled.compiled is not None
    assert compiled.compiled.failure is None and compiled.compiled.seconds is not None
    # The warm-up trained a copy: the agent itself has not moved.
    for p, q in zip(eager.critic.parameters(), compiled.critic.parameters(), strict=True):
        assert torch.equal(p, q)
    for seed in range(3):
        a = eager.update(_batch(seed), torch.Generator().manual_seed(seed))
        b = compiled.update(_batch(seed), torch.Generator().manual_seed(seed))
        for key in a:
            torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-5)
    for p, q in zip(eager.actor.parameters(), compiled.actor.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
