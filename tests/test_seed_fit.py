"""Batched seeds' model fits (mbrl.models.seed_fit) against each seed's solo fit: the
reference is the seed's own ModelTrainer, fitting alone on the same rows with the same
generator."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from mbrl.models.dynamics import DynamicsModel
from mbrl.models.model_registry import model_config
from mbrl.models.seed_fit import SeedFits
from mbrl.models.training import ModelTrainer

# Seeds hold different numbers of rows (episodes end at different steps): their epochs have
# 10, 13 and 9 minibatches of 32, so the seeds sit out different steps.
ROWS = (300, 410, 257)
# vmap's batched matmuls round differently from a solo fit's (and on a CPU the flow's spline
# is nflows' solo, rq_forward batched). In float32 the difference grows with every Adam step
# (a weight: 1e-5 after 3 epochs, 1e-3 after 6; CPU, torch 2.13) until an early-stopping or
# best-epoch decision flips; so the fits compared here run in float64 (the largest difference
# after two fits of 3 epochs: 1e-12), and short.
TOL = 1e-9
# Adam's moments hold the gradients themselves, where the flow's two spline formulas (nflows'
# solo, rq_forward batched) differ most: up to 4e-9 after two fits
MOMENT_TOL = 1e-7


@pytest.fixture(autouse=True)
def _float64() -> object:
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


def _trainer(kind: str, seed: int, **keys: object) -> ModelTrainer:
    cfg = model_config(kind, members=3, elites=2, batch_size=32, **keys)
    torch.manual_seed(100 + seed)
    return ModelTrainer(DynamicsModel(5, 2, cfg), cfg)


def _rows(seed: int, n: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    obs, act = torch.randn(n, 5, generator=g), torch.rand(n, 2, generator=g) * 2 - 1
    next_obs = obs + 0.1 * torch.sin(obs) + 0.05 * act.sum(-1, keepdim=True)
    return {"obs": obs, "act": act, "next_obs": next_obs, "rew": obs[:, 0] - act[:, 1]}


Metrics = list[dict[str, Any]]


def _solo_and_batched(
    kind: str, fits: int, **keys: object
) -> tuple[list[ModelTrainer], list[ModelTrainer], Metrics, Metrics]:
    """``fits`` fits of three seeds, solo and batched; each side's trainers and metrics."""
    solo = [_trainer(kind, s, **keys) for s in range(len(ROWS))]
    batched = [_trainer(kind, s, **keys) for s in range(len(ROWS))]
    fitter = SeedFits(batched)
    for k in range(fits):
        data = [_rows(10 * k + s, n + 40 * k) for s, n in enumerate(ROWS)]
        want = []
        for s, (t, d) in enumerate(zip(solo, data, strict=True)):
            out = t.fit(
                d["obs"], d["act"], d["next_obs"], d["rew"], torch.Generator().manual_seed(s)
            )
            assert out is not None  # (no stop: the fit ran to its end)
            want.append(out)
        got = fitter.fit(data, [torch.Generator().manual_seed(s) for s in range(len(ROWS))])
    return solo, batched, want, got


def _compare(
    solo: list[ModelTrainer], batched: list[ModelTrainer], want: Metrics, got: Metrics
) -> None:
    for a, b, wa, wb in zip(solo, batched, want, got, strict=True):
        assert wa["model/epochs"] == wb["model/epochs"]
        assert torch.equal(a.model.elites, b.model.elites)
        assert a.fits == b.fits
        for (name, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
            torch.testing.assert_close(q, p, atol=TOL, rtol=0, msg=name)
        for name, buf in a.model.named_buffers():  # normalisers
            torch.testing.assert_close(dict(b.model.named_buffers())[name], buf, msg=name)
        sa, sb = a.state_dict(), b.state_dict()
        assert torch.equal(sa["nonfinite_steps"], sb["nonfinite_steps"])
        for i, st in sa["opt"]["state"].items():  # Adam: moments and the step count
            assert float(sb["opt"]["state"][i]["step"]) == float(st["step"])
            for key in ("exp_avg", "exp_avg_sq"):
                moment, solo_moment = sb["opt"]["state"][i][key], st[key]
                torch.testing.assert_close(moment, solo_moment, atol=MOMENT_TOL, rtol=MOMENT_TOL)
        for key in ("model/train_loss", "model/holdout_mse", "model/holdout_nll"):
            torch.testing.assert_close(
                torch.as_tensor(wb[key]), torch.as_tensor(wa[key]), atol=TOL, rtol=TOL
            )
        assert wb["model/train_rows"] == wa["model/train_rows"]
        assert wb["model/holdout_rows"] == wa["model/holdout_rows"]


@pytest.mark.parametrize("kind", ["flow", "gaussian"])
def test_batched_fits_are_the_seeds_solo_fits(kind: str) -> None:
    """Two fits (the second goes on from the first's Adam state and adds rows) of three seeds
    with different row counts: each seed's weights, normalisers, elites, Adam moments and
    step count, and metrics are its solo fit's (the Gaussian: shared log-variance bounds)."""
    _compare(*_solo_and_batched(kind, fits=2, max_epochs=3))


def test_each_seed_stops_when_its_solo_fit_stops() -> None:
    """Early stopping per seed: with patience 0 and a 10 % gain to count, the seeds' fits
    stop at different epochs, each at its solo fit's; the seeds that stopped sit out the
    others' epochs (their Adam step counts are their solo fits')."""
    solo, batched, want, got = _solo_and_batched("gaussian", fits=1, patience=0, improvement=0.1)
    assert len({m["model/epochs"] for m in want}) > 1  # (else nothing was masked)
    _compare(solo, batched, want, got)


def test_masked_adam_is_torch_adamw_for_the_seeds_that_step() -> None:
    """One step of the stacked Adam: the seeds that step move as torch's AdamW (decoupled
    weight decay) moves a solo copy; the others keep weights, moments and step count."""
    trainers = [_trainer("flow", s, weight_decay=0.01) for s in range(3)]
    fitter = SeedFits(trainers)
    fitter._copy_in()
    name = next(iter(fitter.params))
    before = {n: p.clone() for n, p in fitter.params.items()}
    grads = {n: torch.randn_like(p) for n, p in fitter.params.items()}
    for _ in range(2):  # (two steps: the second reads the moments of the first)
        fitter._adam(grads, torch.tensor([True, False, True]))
    assert torch.equal(fitter.params[name][1], before[name][1])
    assert torch.equal(fitter.exp_avg[name][1], torch.zeros_like(before[name][1]))
    assert fitter.steps.tolist() == [2.0, 0.0, 2.0]
    for s in (0, 2):
        p = torch.nn.Parameter(before[name][s].clone())
        group = trainers[s].opt.param_groups[0]
        opt = torch.optim.AdamW(
            [p], lr=group["lr"], betas=group["betas"], eps=group["eps"], weight_decay=0.01
        )
        for _ in range(2):
            p.grad = grads[name][s].clone()
            opt.step()
        torch.testing.assert_close(fitter.params[name][s], p.detach(), atol=1e-12, rtol=1e-12)


def test_a_batch_refuses_unlike_models_and_a_paused_fit() -> None:
    """Clear errors before any work: seeds configured unlike, and a seed whose checkpoint
    holds a paused fit (a batch never pauses one)."""
    with pytest.raises(ValueError, match="not configured as seed 0's"):
        SeedFits([_trainer("flow", 0), _trainer("flow", 1, max_epochs=2)])
    trainers = [_trainer("gaussian", s, max_epochs=2) for s in range(2)]
    paused = copy.deepcopy(trainers[1])
    data = _rows(0, 100)
    obs, act, next_obs, rew = data["obs"], data["act"], data["next_obs"], data["rew"]
    assert (
        paused.fit(obs, act, next_obs, rew, torch.Generator().manual_seed(0), stop=lambda: True)
        is None
    )
    with pytest.raises(ValueError, match="seed 1's checkpoint holds a paused model fit"):
        SeedFits([trainers[0], paused]).fit([data, data], [torch.Generator()] * 2)
