"""The optimizer step: torch's fused Adam behind a guard that skips non-finite losses on the
device (no host sync), so that a bad batch never reaches the weights or Adam's moments."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

from mbrl.optim import GuardedStep, adam


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _groups(model: nn.Module) -> list[dict[str, object]]:
    # Two groups with their own learning rates and weight decay, as SAC's actor and critic.
    return [
        {"params": list(model[0].parameters()), "lr": 1e-2},
        {"params": list(model[2].parameters()), "lr": 3e-3, "weight_decay": 0.1},
    ]


@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_is_torchs_fused_adam(decoupled: bool) -> None:
    """``adam`` is torch.optim.Adam / AdamW with the fused kernel; its steps equal torch's
    default (for-loop) implementation's."""
    ref, mine = _model(), _model()
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    ref_opt = cls(_groups(ref), lr=1e-3, weight_decay=0.0, foreach=False)  # type: ignore[arg-type]
    opt = adam(_groups(mine), 1e-3, decoupled=decoupled)
    assert type(opt) is cls and opt.defaults["fused"] and not opt.defaults["capturable"]
    x = torch.randn(16, 4)
    for _ in range(5):
        for model, o in ((ref, ref_opt), (mine, opt)):
            o.zero_grad()
            model(x).square().mean().backward()
            o.step()
    for p, q in zip(ref.parameters(), mine.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


@pytest.mark.cuda
def test_a_capturable_adam_steps_eagerly_without_a_warning() -> None:
    """On CUDA the optimizer is capturable (its steps can be graphed); the eager warm-up steps
    before a capture, and every step of an eager run, must not warn that capturable "can
    impair performance" (torch < 2.13 did, once per optimizer)."""
    model = _model().cuda()
    opt = adam(_groups(model), 1e-3)
    assert opt.defaults["capturable"]
    x = torch.randn(16, 4, device="cuda")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    assert not [w for w in seen if "capturable" in str(w.message)], [str(w.message) for w in seen]


def test_guarded_step_skips_a_nonfinite_loss_on_the_device(host_reads: list[str]) -> None:
    model = _model()
    opt = adam(_groups(model), 1e-3)
    guard = GuardedStep(opt, torch.amp.GradScaler("cpu", enabled=False))
    x = torch.randn(16, 4)
    guard(model(x).square().mean())
    before = copy.deepcopy((model.state_dict(), opt.state_dict()))
    guard(model(x).square().mean() * float("nan"))
    assert host_reads == []  # decided on the device
    assert int(guard.skipped) == 1
    assert all(torch.equal(v, before[0][k]) for k, v in model.state_dict().items())
    for p, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            assert torch.equal(value, before[1]["state"][p][key]), key
    guard(model(x).square().mean())  # and the next finite loss trains
    assert all(int(opt.state[p]["step"]) == 2 for p in model.parameters())
    assert int(guard.skipped) == 1


def test_guarded_step_of_an_unfused_optimizer_skips_with_zero_gradients() -> None:
    """Without a fused kernel the guard zeroes the gradients of a non-finite step."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = GuardedStep(opt, torch.amp.GradScaler("cpu", enabled=False))
    before = copy.deepcopy(model.state_dict())
    guard(model(torch.randn(16, 4)).square().mean() * float("inf"))
    assert int(guard.skipped) == 1
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
