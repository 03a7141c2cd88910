"""Coupled flows: the Donsker-Varadhan objective drives x towards log(dQ/dP)."""

from __future__ import annotations

import torch

from flows.coupled import CoupledFlows
from mbrl.config import RewarderConfig
from mbrl.models import DynamicsModel
from mbrl.rewarder import Rewarder

from tests_support import tiny_model_config


def test_dv_training_recovers_the_log_density_ratio() -> None:
    """P = N(0, I), Q = N(mu, I): log dQ/dP(z) = mu.z - |mu|^2 / 2 (up to the DV constant)."""
    torch.manual_seed(0)
    mu = torch.tensor([1.0, -0.5])
    flows = CoupledFlows(2, layers=2, hidden=(32,), bins=6)
    opt = torch.optim.Adam(flows.parameters(), lr=3e-3)
    for _ in range(500):
        p, q = torch.randn(512, 2), torch.randn(512, 2) + mu
        loss, _, _ = flows.dv_loss(p, q)
        opt.zero_grad()
        loss.backward()
        opt.step()
    z = torch.randn(2000, 2) * 0.8 + mu / 2  # where both densities have mass
    with torch.no_grad():
        x = flows(z)
    truth = z @ mu - mu.square().sum() / 2
    # The DV optimum is log-ratio + const: compare after centring.
    err = (x - x.mean()) - (truth - truth.mean())
    assert err.abs().mean() < 0.15 * truth.std()
    assert torch.corrcoef(torch.stack([x, truth]))[0, 1] > 0.97


def test_rewarder_fit_and_score_shapes() -> None:
    torch.manual_seed(0)
    model = DynamicsModel(3, 1, tiny_model_config(members=2, elites=2))
    real = {
        "obs": torch.randn(300, 3),
        "act": torch.rand(300, 1) * 2 - 1,
        "next_obs": torch.randn(300, 3),
        "rew": torch.randn(300),
    }
    rewarder = Rewarder(
        3, 1, RewarderConfig(mode="penalty", steps=5, layers=2, hidden=[16]), torch.device("cpu")
    )
    metrics = rewarder.fit(model, real, torch.Generator().manual_seed(0))
    for key in (
        "rewarder/loss",
        "rewarder/x_real_mean",
        "rewarder/x_model_p90",
        "rewarder/x_real_p10",
    ):
        assert torch.isfinite(metrics[key]), key
    score = rewarder.score(
        model, real["obs"][:7], real["act"][:7], real["next_obs"][:7], real["rew"][:7]
    )
    assert score.shape == (7,) and not score.requires_grad
    state = rewarder.state_dict()
    other = Rewarder(
        3, 1, RewarderConfig(mode="penalty", layers=2, hidden=[16]), torch.device("cpu")
    )
    other.load_state_dict(state)
    torch.testing.assert_close(
        other.score(model, real["obs"][:7], real["act"][:7], real["next_obs"][:7], real["rew"][:7]),
        score,
    )
