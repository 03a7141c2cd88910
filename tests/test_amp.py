"""AMP numerics: under bf16 autocast only hidden layers run in bf16; output heads (Q values,
the actor's mean / log-std, the Gaussian's mean / log-variance, the flow's base and coupling
parameters), losses and log-determinants are fp32. bf16 autocast runs on a CPU too."""

from __future__ import annotations

import math

import torch

from flows import EnsembleConditionalFlow
from mbrl.agents import SAC, SACConfig
from mbrl.agents.networks import TwinQ
from mbrl.models import DynamicsModel

from tests_support import tiny_model_config

BF16_SPACING_AT_300 = 2.0  # bf16 keeps 8 significant bits: numbers in [256, 512) step by 2


def _sac_pair() -> tuple[SAC, SAC]:
    torch.manual_seed(0)
    cfg = SACConfig(hidden_sizes=[256, 256])
    low, full = SAC(11, 3, cfg, amp="bf16"), SAC(11, 3, cfg)
    with torch.no_grad():  # Q ~ 300, as on Hopper once it hops
        for sac in (low, full):
            assert isinstance(sac.critic, TwinQ)
            sac.critic.linears[-1].bias.fill_(300.0)
    full.critic.load_state_dict(low.critic.state_dict())
    full.actor.load_state_dict(low.actor.state_dict())
    return low, full


@torch.no_grad()
def test_bf16_critic_q_is_far_more_precise_than_bf16_spacing() -> None:
    low, full = _sac_pair()
    g = torch.Generator().manual_seed(1)
    obs, act = torch.randn(512, 11, generator=g), torch.rand(512, 3, generator=g) * 2 - 1
    q32 = full.critic(obs, act)
    with low.autocast():
        q16 = low.critic(obs, act)
    assert q16.dtype == torch.float32
    assert float(q32.min()) > 250 and float(q32.max()) < 350
    err = (q16 - q32).abs().max()
    assert float(err) < BF16_SPACING_AT_300 / 8, err
    # What a bf16 head would return: rounded to a multiple of 2, errors up to 1.
    rounded = (q32.bfloat16().float() - q32).abs().max()
    assert float(rounded) > BF16_SPACING_AT_300 / 8


@torch.no_grad()
def test_bf16_actor_heads_are_fp32() -> None:
    low, full = _sac_pair()
    obs = torch.randn(512, 11, generator=torch.Generator().manual_seed(2))
    mean32, log_std32 = full.actor(obs)
    with low.autocast():
        mean16, log_std16 = low.actor(obs)
        h = low.actor.net[:-1](obs)
    assert h.dtype == torch.bfloat16  # the hidden layers do run in bf16
    assert mean16.dtype == log_std16.dtype == torch.float32
    # Errors come only from the bf16 hidden activations: far below a bf16 rounding of the
    # outputs themselves (relative 2^-8).
    assert float((mean16 - mean32).abs().max()) < 0.02
    assert float((log_std16 - log_std32).abs().max()) < 0.02


@torch.no_grad()
def test_bf16_flow_log_prob_is_within_a_tenth_of_a_nat_of_fp32() -> None:
    """A flow whose base layer is sharp (scale e^-5 around loc ~ 1.5): a bf16 loc would be off
    by up to 2^-8 * 1.5, i.e. ~0.9 of the scale, and log p by nats; with the base and coupling
    parameters in fp32 the mean error stays below 0.1 nat (12 dims, log p ~ 43)."""
    torch.manual_seed(0)
    d, c, b = 12, 14, 4000
    flow = EnsembleConditionalFlow(
        3, d, c, layers=2, hidden=(64,), embed_hidden=(64,), embed_dim=32
    )
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.05 * torch.randn_like(p))
        flow.base.bias[..., :d] += 1.5
        flow.base.bias[..., d:] = math.log(5 / 7) - math.log(5)  # log-scale -5 (bounds -10, 2)
    ctx = torch.randn(b, c)
    y = flow(ctx).sample(generator=torch.Generator().manual_seed(1))
    lp32 = flow(ctx).log_prob(y)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp16 = flow(ctx).log_prob(y)
    assert lp16.dtype == torch.float32 and float(lp32.mean()) > 30
    assert float((lp16 - lp32).abs().mean()) < 0.1


@torch.no_grad()
def test_bf16_gaussian_heads_are_fp32() -> None:
    torch.manual_seed(0)
    model = DynamicsModel(11, 3, tiny_model_config("gaussian", members=3, elites=2))
    x = torch.randn(3, 256, 14)
    full = model.ensemble(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model.ensemble(x)
        loss, _ = model.loss(x, torch.randn(3, 256, 12))
    assert low.mean.dtype == low.logvar.dtype == loss.dtype == torch.float32
    assert float((low.mean - full.mean).abs().max()) < 0.02
