"""Changing a SAC loss is a change in one method: a subclass with another critic loss trains
through autograd (the hand-written fast path steps aside), and its gradients are those of the
new loss, computed here independently."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

from mbrl.agents.sac import SAC
from mbrl.config import SACConfig

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
    g = torch.Generator().manual_seed(0)
    return {
        "obs": torch.randn(B, OBS, generator=g),
        "act": torch.rand(B, ACT, generator=g) * 2 - 1,
        "rew": 3.0 * torch.randn(B, generator=g),  # TD errors beyond Huber's delta of 1
        "next_obs": torch.randn(B, OBS, generator=g),
        "terminated": torch.rand(B, generator=g) < 0.2,
    }


def test_the_default_takes_the_fast_path_on_a_cpu() -> None:
    sac = SAC(OBS, ACT, SACConfig(hidden_sizes=[16]))
    assert sac.uses_own_losses() and sac.handwritten


def test_a_changed_critic_loss_trains_through_autograd() -> None:
    torch.manual_seed(0)
    sac = HuberSAC(OBS, ACT, SACConfig(hidden_sizes=[16, 16]))
    assert not sac.uses_own_losses() and not sac.handwritten
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


def test_forcing_the_fast_path_on_a_changed_loss_is_refused() -> None:
    with pytest.raises(ValueError, match=r"agent\.grads=handwritten cannot run with HuberSAC"):
        HuberSAC(OBS, ACT, SACConfig(hidden_sizes=[8], grads="handwritten"))
    with pytest.raises(ValueError, match="amp=fp16"):
        SAC(OBS, ACT, SACConfig(hidden_sizes=[8], grads="handwritten"), amp="fp16")


def test_an_edited_loss_is_seen_and_trains_through_autograd(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Editing ``SAC.critic_loss`` in place (no subclass): the start-up check finds that the
    hand-written gradients no longer match, and the update runs through autograd."""
    monkeypatch.setattr(SAC, "critic_loss", HuberSAC.critic_loss)
    with caplog.at_level("WARNING"):
        sac = SAC(OBS, ACT, SACConfig(hidden_sizes=[16]))
    assert sac.uses_own_losses() and not sac.handwritten
    assert "training through autograd" in caplog.text


def test_an_edited_network_is_seen_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tanh instead of ReLU in the actor and critics: not what the gradients were derived for."""
    import functools

    from flows import nn as flows_nn
    from mbrl.agents import networks

    monkeypatch.setattr(networks, "mlp", functools.partial(networks.mlp, act=nn.Tanh))
    original = flows_nn.EnsembleMLP.__init__

    def tanh_mlp(self: nn.Module, *args: object, **kwargs: object) -> None:
        kwargs["act"] = nn.Tanh
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(flows_nn.EnsembleMLP, "__init__", tanh_mlp)
    assert not SAC(OBS, ACT, SACConfig(hidden_sizes=[16])).handwritten
    with pytest.raises(ValueError, match="networks that differ"):
        SAC(OBS, ACT, SACConfig(hidden_sizes=[16], grads="handwritten"))
