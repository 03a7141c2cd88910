"""The direct fused-Adam step against torch.optim's own step."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from mbrl.fastpath.adam_step import FusedAdamStep
from mbrl.optim import GuardedStep, adam


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _opt(model: nn.Module, decoupled: bool | str) -> torch.optim.Optimizer:
    # Two groups with their own learning rates and weight decay, as SAC's actor and critic.
    groups = [
        {"params": list(model[0].parameters()), "lr": 1e-2},
        {"params": list(model[2].parameters()), "lr": 3e-3, "weight_decay": 0.1},
    ]
    if decoupled == "flag":  # Adam(decoupled_weight_decay=True) is AdamW under another name
        return torch.optim.Adam(groups, lr=1e-3, fused=True, decoupled_weight_decay=True)
    return adam(groups, 1e-3, decoupled=bool(decoupled))


def _grads(model: nn.Module, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=g) for p in model.parameters()]


@pytest.mark.parametrize("decoupled", [False, True, "flag"])
def test_direct_step_equals_torch_step(decoupled: bool | str) -> None:
    ref, mine = _model(), _model()
    ref_opt, opt = _opt(ref, decoupled), _opt(mine, decoupled)
    step = FusedAdamStep(opt)
    finite = torch.tensor(True)
    for seed in range(5):
        grads = _grads(ref, seed)
        for p, g in zip(ref.parameters(), grads, strict=True):
            p.grad = g.clone()
        ref_opt.step()
        step(grads, finite)
    for p, q in zip(ref.parameters(), mine.parameters(), strict=True):
        assert torch.equal(p, q)
    for p, q in zip(ref.parameters(), mine.parameters(), strict=True):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(ref_opt.state[p][key], opt.state[q][key]), key


def test_skipped_step_changes_nothing() -> None:
    model = _model()
    opt = _opt(model, False)
    step = FusedAdamStep(opt)
    step(_grads(model, 0), torch.tensor(True))
    before = copy.deepcopy((model.state_dict(), opt.state_dict()))
    step(_grads(model, 1), torch.tensor(False))
    assert all(torch.equal(v, before[0][k]) for k, v in model.state_dict().items())
    for p, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            assert torch.equal(value, before[1]["state"][p][key]), key
    assert int(step.step_count) == 1


def test_state_dict_round_trip_continues_identically() -> None:
    """Saved mid-run and loaded into a fresh optimizer (whose state torch rebuilds as one
    step tensor per parameter), the run continues as the uninterrupted one; torch's own Adam
    continues from the same state_dict the same way."""
    a = _model()
    opt_a = _opt(a, False)
    step_a = FusedAdamStep(opt_a)
    step_a(_grads(a, 0), torch.tensor(True))
    saved = copy.deepcopy((a.state_dict(), opt_a.state_dict()))
    b, c = _model(), _model()
    b.load_state_dict(saved[0])
    c.load_state_dict(saved[0])
    opt_b, opt_c = _opt(b, False), _opt(c, False)
    opt_b.load_state_dict(copy.deepcopy(saved[1]))
    opt_c.load_state_dict(copy.deepcopy(saved[1]))
    step_b = FusedAdamStep(opt_b)
    for seed in (1, 2):
        step_a(_grads(a, seed), torch.tensor(True))
        step_b(_grads(b, seed), torch.tensor(True))
        for p, g in zip(c.parameters(), _grads(c, seed), strict=True):
            p.grad = g
        opt_c.step()
    for p, q, r in zip(a.parameters(), b.parameters(), c.parameters(), strict=True):
        assert torch.equal(p, q) and torch.equal(p, r)
    assert int(step_b.step_count) == 3


def test_guarded_direct_step_skips_nonfinite_loss() -> None:
    model = _model()
    opt = _opt(model, False)
    guard = GuardedStep(opt, torch.amp.GradScaler("cpu", enabled=False), direct=FusedAdamStep(opt))
    x = torch.randn(16, 4)
    guard(model(x).square().mean())  # autograd's gradients, read from .grad
    before = copy.deepcopy(model.state_dict())
    guard(model(x).square().mean() * float("nan"))
    assert int(guard.skipped) == 1
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(int(opt.state[p]["step"]) == 1 for p in model.parameters())


def test_unsupported_optimizers_and_gradient_counts_are_refused() -> None:
    model = _model()
    with pytest.raises(ValueError, match="fused Adam"):
        FusedAdamStep(torch.optim.Adam(model.parameters(), amsgrad=True, fused=True))
    with pytest.raises(ValueError, match="fused Adam"):
        FusedAdamStep(torch.optim.SGD(model.parameters(), lr=0.1))
    step = FusedAdamStep(_opt(model, False))
    with pytest.raises(ValueError, match="3 gradients for 4 parameters"):
        step(_grads(model, 0)[:3], torch.tensor(True))
