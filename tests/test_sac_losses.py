"""Changing a SAC loss or network is a change in one place: a subclass (or an in-place edit)
with another critic loss, or critics of another shape, trains through autograd, eager or
compiled, and its gradients are those of the new loss, computed here independently."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from flows.nn import EnsembleMLP
from mbrl.agents.sac import SAC, SACConfig
from mbrl.buffer import random_transitions

OBS, ACT, B = 5, 2, 32


class HuberSAC(SAC):
    """SAC whose critics minimise the Huber loss of the TD error instead of its square."""

    def critic_loss(
        self,
        obs: Tensor,
        act: Tensor,
        rew: Tensor,
        next_obs: Tensor,
        term: Tensor,
        alpha: Tensor,
        noise: Tensor,
    ) -> tuple[Tensor, Tensor]:
        with self.autocast():
            q = self.critic(obs, act)
        target = self.target_q(rew, next_obs, term, alpha, noise).expand_as(q)
        return nn.functional.huber_loss(q, target, reduction="none").mean(dim=1).sum(), q


def _batch() -> dict[str, Tensor]:
    batch = random_transitions(B, OBS, ACT, torch.Generator().manual_seed(0))
    batch["rew"] = 3.0 * batch["rew"]  # TD errors beyond Huber's delta of 1
    return batch


@pytest.mark.parametrize("compile", [False, True])
def test_a_changed_critic_loss_trains_as_written(compile: bool) -> None:
    torch.manual_seed(0)
    sac = HuberSAC(OBS, ACT, SACConfig(hidden_sizes=[16, 16]), compile=compile)
    _check_huber_gradients(sac)


def test_a_loss_edited_in_place_trains_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing ``SAC.critic_loss`` itself (no subclass) changes what trains."""
    monkeypatch.setattr(SAC, "critic_loss", HuberSAC.critic_loss)
    torch.manual_seed(0)
    _check_huber_gradients(SAC(OBS, ACT, SACConfig(hidden_sizes=[16, 16])))


def _check_huber_gradients(sac: SAC) -> None:
    assert sac.critic_target is not None
    critic, actor, target = (copy.deepcopy(m) for m in (sac.critic, sac.actor, sac.critic_target))
    b = _batch()
    sac.update(b, torch.Generator().manual_seed(7))

    # The reference: Huber on TD errors, written out here on copies of the networks.
    noise = torch.randn((2, B, ACT), generator=torch.Generator().manual_seed(7))
    alpha = 1.0  # init_alpha
    with torch.no_grad():
        mean, log_std = actor(b["next_obs"])
        u = mean + log_std.exp() * noise[1]
        a_next = torch.tanh(u)
        logp = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
        logp = logp - torch.log(1 - a_next.square()).sum(-1)
        q_next = target(b["next_obs"], a_next).min(0).values
        y = b["rew"] + 0.99 * (~b["terminated"]).float() * (q_next - alpha * logp)
    q = critic(b["obs"], b["act"])
    err = (q - y).abs()
    huber = torch.where(err < 1.0, 0.5 * err.square(), err - 0.5).mean(1).sum()
    expected = torch.autograd.grad(huber, list(critic.parameters()), retain_graph=True)
    for p, e in zip(sac.critic.parameters(), expected, strict=True):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-5)
    # ... and they differ from the squared loss's gradients (the change took effect).
    squared = 0.5 * (q - y).square().mean(1).sum()
    plain = torch.autograd.grad(squared, list(critic.parameters()))
    pairs = zip(sac.critic.parameters(), plain, strict=True)
    assert any(float((p.grad - g).abs().max()) > 1e-3 for p, g in pairs if p.grad is not None)


class AtomQ(nn.Module):
    """Twin critics with a 5-atom head each (a distributional-style critic): (obs, act) ->
    atoms [2, B, 5]; Q is their mean."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        super().__init__()
        self.net = EnsembleMLP(2, obs_dim + act_dim, cfg.hidden_sizes, 5, act=nn.ReLU)

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        return self.net(torch.cat([obs, act], dim=-1).expand(2, -1, -1)).mean(-1)


class AtomSAC(SAC):
    def build_critic(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> AtomQ:
        return AtomQ(obs_dim, act_dim, cfg)


@pytest.mark.parametrize("compile", [False, True])
def test_critics_of_another_shape_train(compile: bool) -> None:
    """A 5-atom critic head, chosen by overriding ``build_critic``: the update trains it, and
    its gradients are autograd's on SAC's losses computed here from copies of the nets."""
    cfg = SACConfig(hidden_sizes=[16, 16])
    torch.manual_seed(0)
    sac = AtomSAC(OBS, ACT, cfg, compile=compile)
    torch.manual_seed(0)
    ref = AtomSAC(OBS, ACT, cfg)  # the same initial weights
    assert isinstance(sac.critic, AtomQ)
    assert sac.critic.net.last.out_dim == 5
    b = _batch()
    sac.update(b, torch.Generator().manual_seed(3))
    noise = torch.randn((2, B, ACT), generator=torch.Generator().manual_seed(3))
    y = ref.target_q(b["rew"], b["next_obs"], b["terminated"], torch.tensor(1.0), noise[1])
    loss = 0.5 * (ref.critic(b["obs"], b["act"]) - y).square().mean(1).sum()
    critic = ref.critic
    expected = torch.autograd.grad(loss, list(critic.parameters()))
    for p, e in zip(sac.critic.parameters(), expected, strict=True):
        assert p.grad is not None
        torch.testing.assert_close(p.grad, e, rtol=1e-4, atol=1e-5)
