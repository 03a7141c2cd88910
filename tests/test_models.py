"""Dynamics models: normaliser, Gaussian ensemble, random-elite sampling, MBPO-style fitting."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from mbrl.config import ConfigError, ModelConfig
from mbrl.envs import make_env
from mbrl.models import DynamicsModel, GaussianConfig, GaussianEnsemble, ModelTrainer, Normalizer
from mbrl.models.model_registry import model_class

from tests_support import ensemble_linears
from tests_support import tiny_model_config as _cfg


def test_normalizer_roundtrip_and_constant_dims() -> None:
    x = torch.randn(100, 3) * torch.tensor([2.0, 0.5, 0.0]) + 4.0
    norm = Normalizer(3)
    norm.fit(x)
    z = norm(x)
    torch.testing.assert_close(z[:, :2].mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    assert norm.std[2] == 1.0  # a constant column is not blown up
    torch.testing.assert_close(norm.inverse(z), x)
    assert set(norm.state_dict()) == {"mean", "std"}


def test_gaussian_log_prob_matches_torch_normal() -> None:
    torch.manual_seed(0)
    cfg = _cfg("gaussian", members=3, hidden=[16], l2=[0, 0])
    assert isinstance(cfg, GaussianConfig)
    g = GaussianEnsemble(2, 4, cfg)
    ctx, y = torch.randn(5, 4), torch.randn(5, 2)
    dist = g(ctx)
    ref = torch.distributions.Normal(dist.mean, (0.5 * dist.logvar).exp()).log_prob(y).sum(-1)
    torch.testing.assert_close(dist.log_prob(y), ref)
    assert dist.sample().shape == (3, 5, 2) and g.regularizer().shape == ()


def _member_marking_model(elites: list[int]) -> DynamicsModel:
    """A Gaussian ensemble whose member m predicts ds = m, r = m with (almost) no noise."""
    model = DynamicsModel(2, 1, _cfg("gaussian", members=5, elites=len(elites)))
    ensemble = model.ensemble
    assert isinstance(ensemble, GaussianEnsemble)
    with torch.no_grad():
        for layer in ensemble_linears(ensemble.net):
            layer.weight.zero_()
            layer.bias.zero_()
        last = ensemble.net.last
        last.bias[:, 0, :3] = torch.arange(5.0)[:, None]  # means
        last.bias[:, 0, 3:] = -30.0  # log-variance at its lower bound
        ensemble.min_logvar.fill_(-30.0)
        model.elites.copy_(torch.tensor(elites))
    return model


def test_sample_gives_each_row_a_random_elite_without_syncs(host_reads: list[str]) -> None:
    model = _member_marking_model([1, 3, 4])
    obs, act = torch.zeros(999, 2), torch.zeros(999, 1)
    next_obs, rew = model.sample(obs, act, torch.Generator().manual_seed(0))
    assert host_reads == []
    members = rew.round().long()
    torch.testing.assert_close(next_obs[:, 0], rew, atol=1e-3, rtol=0)
    assert set(members.tolist()) == {1, 3, 4}  # elites only
    assert torch.bincount(members, minlength=5)[[1, 3, 4]].tolist() == [333, 333, 333]
    other, _ = model.sample(obs, act, torch.Generator().manual_seed(1))
    assert not torch.equal(other, next_obs)  # the assignment is random per call


def test_elite_draws_give_every_elite_on_every_row_without_syncs(host_reads: list[str]) -> None:
    """docs/model.md's disagreement: elite k's draws are member elites[k]'s (ds = r = m), all
    rows; their spread across the elites is the members' spread, computed here."""
    model = _member_marking_model([1, 3, 4])
    obs, act = torch.zeros(7, 2), torch.zeros(7, 1)
    draws = model.elite_draws(obs, act, torch.Generator().manual_seed(0))
    assert host_reads == [] and draws.shape == (3, 7, 3)
    expected = torch.tensor([1.0, 3.0, 4.0])[:, None, None].expand(3, 7, 3)
    torch.testing.assert_close(draws, expected, atol=1e-3, rtol=0)
    spread = torch.tensor([1.0, 3.0, 4.0]).std()  # (the same in each of the 3 targets)
    u = draws.std(dim=0).norm(dim=-1)
    torch.testing.assert_close(u, torch.full((7,), float(spread) * 3**0.5), atol=1e-3, rtol=0)


def test_elite_draws_averaged_leave_the_members_disagreement() -> None:
    """A freshly built flow's members are one map (the identity), so its elites disagree in
    nothing but their draws' noise: averaging 256 draws per elite divides the spread by
    about 16 (sqrt 256); one draw per elite shows the noise alone."""
    model = DynamicsModel(2, 1, _cfg("flow", members=4, elites=3))
    obs, act = torch.randn(500, 2), torch.rand(500, 1)
    one = model.elite_draws(obs, act, torch.Generator().manual_seed(0)).std(dim=0).mean()
    many = model.elite_draws(obs, act, torch.Generator().manual_seed(0), draws=256)
    assert many.shape == (3, 500, 3)
    assert 0.03 < float(many.std(dim=0).mean() / one) < 0.1  # (1/16 = 0.0625)


def _linear_data(n: int, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs, act = torch.randn(n, 2, generator=g), torch.rand(n, 1, generator=g) * 2 - 1
    next_obs = obs + 0.1 * act + 0.05 * torch.randn(n, 2, generator=g)
    rew = obs[:, 0] - act[:, 0].square()
    return obs, act, next_obs, rew


@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_fit_learns_selects_elites_and_restores_best(name: str) -> None:
    torch.manual_seed(0)
    model = DynamicsModel(2, 1, _cfg(name, members=4, elites=2, max_epochs=40, batch_size=64))
    trainer = ModelTrainer(model, model.cfg)
    data = _linear_data(1000)
    gen = torch.Generator().manual_seed(0)
    untrained = trainer.holdout_score(
        model.in_norm(torch.cat(data[:2], -1)), model.targets(data[0], data[2], data[3]), "nll"
    )
    metrics = trainer.fit(*data, gen)
    assert metrics is not None
    assert metrics["model/epochs"] <= 40 and metrics["model/holdout_rows"] == 200
    assert float(metrics["model/holdout_nll"]) < float(untrained.min()) - 1.0
    # Elites are the members with the best holdout score (MSE for the Gaussian as MBPO, NLL
    # for the flow), restored to their best epoch: re-scoring the same holdout rows (same
    # generator draw) reproduces the reported values.
    _, hold = trainer._split(1000, torch.Generator().manual_seed(0))
    x = model.in_norm(torch.cat(data[:2], -1))[hold]
    raw_y = model.targets(data[0], data[2], data[3])[hold]
    y = model.out_norm(raw_y)
    per_member = trainer.holdout_score(x, y)
    assert model.elites.tolist() == sorted(per_member.argsort()[:2].tolist())
    with torch.no_grad():  # MSE of the point prediction in raw target units, by hand
        mode = model.out_norm.inverse(model.ensemble(x, model.elites).mode)
    mse = (mode - raw_y).square().mean()
    torch.testing.assert_close(mse, metrics["model/holdout_mse"])
    nll = trainer.holdout_score(x, y, "nll")[model.elites].mean() + model.out_norm.std.log().sum()
    torch.testing.assert_close(nll, metrics["model/holdout_nll"])


def test_epoch_loop_never_syncs(host_reads: list[str]) -> None:
    model = DynamicsModel(2, 1, _cfg("flow", members=3, elites=2))
    trainer = ModelTrainer(model, model.cfg)
    obs, act, next_obs, rew = _linear_data(300)
    x = model.in_norm(torch.cat([obs, act], -1))
    y = model.out_norm(model.targets(obs, next_obs, rew))
    boot = torch.randint(0, 300, (3, 300))
    trainer._epoch(x, y, boot, torch.Generator().manual_seed(0))
    assert host_reads == []


def test_nonfinite_batch_is_skipped_not_learned(host_reads: list[str]) -> None:
    model = DynamicsModel(2, 1, _cfg("gaussian", members=2, elites=1, batch_size=300))
    trainer = ModelTrainer(model, model.cfg)
    obs, act, next_obs, rew = _linear_data(300)
    x = model.in_norm(torch.cat([obs, act], -1))
    y = model.out_norm(model.targets(obs, next_obs, rew))
    y[7, 0] = float("nan")  # one poisoned row: the only minibatch of the epoch is skipped
    boot = torch.randint(0, 300, (2, 300), generator=torch.Generator().manual_seed(0))
    boot[1, 5] = 7  # member 1's bootstrap draws the poisoned row
    before = [p.detach().clone() for p in model.ensemble.parameters()]
    trainer._epoch(x, y, boot, torch.Generator().manual_seed(0))
    assert host_reads == []
    assert int(trainer._step.skipped) == 1
    for old, new in zip(before, model.ensemble.parameters(), strict=True):
        torch.testing.assert_close(old, new.detach())  # no step, not even a decayed one


def test_early_stopping_and_caps() -> None:
    cfg = _cfg("gaussian", members=2, elites=1, patience=0, max_epochs=300, batch_size=16)
    model = DynamicsModel(2, 1, cfg)
    out = ModelTrainer(model, model.cfg).fit(*_linear_data(200), torch.Generator().manual_seed(0))
    assert out is not None
    assert out["model/epochs"] < 300  # patience 0 stops at the first epoch without a 1 % gain
    model = DynamicsModel(2, 1, _cfg("gaussian", members=2, elites=1, max_seconds=1e-9))
    out = ModelTrainer(model, model.cfg).fit(*_linear_data(200), torch.Generator().manual_seed(0))
    assert out is not None
    assert out["model/epochs"] == 1
    with pytest.raises(ValueError, match="at least 2 transitions"):
        ModelTrainer(model, model.cfg).fit(*_linear_data(1), torch.Generator())


def _hopper_data(steps: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    env, rng = make_env("hopper"), np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        act = rng.uniform(-1, 1, 3).astype(np.float32)
        nxt, r, term, trunc, _ = env.step(act)
        rows.append((obs, act, nxt, r))
        obs = env.reset()[0] if term or trunc else nxt
    cols = [np.array([row[i] for row in rows], dtype=np.float32) for i in range(4)]
    t_obs, t_act, t_next, t_rew = (torch.as_tensor(c) for c in cols)
    return t_obs, t_act, t_next, t_rew


def test_flow_beats_gaussian_on_hopper_holdout_at_equal_data() -> None:
    data = _hopper_data(1500, seed=0)
    nll = {}
    for name in ("flow", "gaussian"):
        torch.manual_seed(0)
        model = DynamicsModel(11, 3, _cfg(name, members=2, elites=2, max_epochs=8))
        out = ModelTrainer(model, model.cfg).fit(*data, torch.Generator().manual_seed(0))
        assert out is not None
        nll[name] = float(out["model/holdout_nll"])
    assert nll["flow"] < nll["gaussian"], nll


@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_the_bars_holdout_figure_is_the_logged_one(name: str) -> None:
    """The progress bar's figure after the last epoch equals the fit's logged
    model/holdout_<criterion> (NLL for the flow, MSE for the Gaussian): the same quantity,
    the same units (raw targets), not the standardised ones."""
    cfg = _cfg(name, members=4, elites=2, max_epochs=6, batch_size=64)
    model = DynamicsModel(2, 1, cfg)
    trainer = ModelTrainer(model, cfg)
    shown: list[float] = []
    g = torch.Generator().manual_seed(0)
    obs, act = 3.0 * torch.randn(600, 2, generator=g), torch.rand(600, 1, generator=g)
    next_obs = obs + 5.0 * torch.randn(600, 2, generator=g)  # targets far from unit scale
    out = trainer.fit(obs, act, next_obs, 10 * torch.randn(600, generator=g), g,
                      on_epoch=lambda epoch, score: shown.append(score))  # fmt: skip
    assert out is not None
    key = "model/holdout_nll" if cfg.select_by == "nll" else "model/holdout_mse"
    assert len(shown) == out["model/epochs"]
    assert shown[-1] == pytest.approx(float(out[key]), rel=1e-5)


def test_a_model_saved_under_its_former_name_density_loads() -> None:
    """Checkpoints written before ``DynamicsModel.ensemble`` had that name hold the ensemble's
    weights under ``density.``: they load into the same weights."""
    torch.manual_seed(0)
    saved = DynamicsModel(3, 2, _cfg("flow", members=3, elites=2)).state_dict()
    old = {k.replace("ensemble.", "density.", 1): v for k, v in saved.items()}
    assert any(k.startswith("density.") for k in old)
    model = DynamicsModel(3, 2, _cfg("flow", members=3, elites=2))
    model.load_state_dict(old)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, saved[key])


class _Unstated(nn.Module):
    """A model class that leaves out what the WorldModel protocol asks it to state."""

    config = ModelConfig
    scores = ("mse",)


def test_a_model_class_that_does_not_state_its_shared_parameters_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"has no `shared` \(the names of its parameters"):
        model_class(f"{__name__}._Unstated")
