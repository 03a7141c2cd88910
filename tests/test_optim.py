"""The optimizer step: torch's fused Adam behind a guard that skips non-finite losses on the
device (no host sync), so that a bad batch never reaches the weights or Adam's moments."""

from __future__ import annotations

import copy
import os
import warnings

import pytest
import torch
from torch import nn

from mbrl.optim import GuardedStep, adam


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def _groups(model: nn.Sequential) -> list[dict[str, object]]:
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
    ref_opt = cls(_groups(ref), lr=1e-3, weight_decay=0.0, foreach=False)
    opt = adam(_groups(mine), 1e-3, decoupled=decoupled)
    assert isinstance(opt, cls) and opt.defaults["fused"] and not opt.defaults["capturable"]
    x = torch.randn(16, 4)
    for _ in range(5):
        for model, o in ((ref, ref_opt), (mine, opt)):
            o.zero_grad()
            model(x).square().mean().backward()
            o.step()
    for p, q in zip(ref.parameters(), mine.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fused", [True, False])
def test_guarded_steps_on_finite_losses_are_the_optimizers_own(fused: bool) -> None:
    """MBPO has no such guard: on finite losses (every step of a healthy run) it must be no
    step of its own. Five guarded steps, fused or not, equal torch's plain Adam steps."""
    ref, mine = _model(), _model()
    ref_opt = torch.optim.Adam(_groups(ref), lr=1e-3, foreach=False)
    opt = adam(_groups(mine), 1e-3) if fused else torch.optim.Adam(_groups(mine), lr=1e-3)
    assert bool(opt.defaults["fused"]) == fused
    guard = GuardedStep(opt, torch.amp.GradScaler("cpu", enabled=False))
    x = torch.randn(16, 4)
    for _ in range(5):
        ref_opt.zero_grad()
        ref(x).square().mean().backward()
        ref_opt.step()
        guard(mine(x).square().mean())
    assert int(guard.skipped) == 0
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


@pytest.mark.parametrize("decoupled", [False, True])
def test_a_copy_of_the_optimizer_keeps_torchs_warned_flag(decoupled: bool) -> None:
    """torch warns that capturable "can impair performance" at an eager step exactly when
    ``_warned_capturable_if_run_uncaptured`` is unset (its graph-capture health check; the
    constructor sets it, torch's __getstate__ drops it). The compile warm-ups step a
    deepcopy of the agent and of the fit step: the copy must keep it. A plain torch Adam's
    copy shows the flag is lost without our class."""
    plain = torch.optim.AdamW if decoupled else torch.optim.Adam
    lost = copy.deepcopy(plain(_model().parameters(), lr=1e-3))
    assert not getattr(lost, "_warned_capturable_if_run_uncaptured", False)
    opt = adam(_groups(_model()), 1e-3, decoupled=decoupled)
    twin = copy.deepcopy(opt)
    assert getattr(twin, "_warned_capturable_if_run_uncaptured", False) is True
    assert twin.state_dict() == opt.state_dict()


@pytest.mark.parametrize(
    ("device", "compile", "ran"),
    [
        pytest.param("cuda", "true", "compiled, graphed", marks=pytest.mark.cuda),
        ("cpu", "false", "eager"),  # (what a CPU can run of it: the test itself in CI)
    ],
)
def test_a_compiled_graphed_run_starts_without_a_capturable_warning(
    device: str, compile: str, ran: str, tmp_path: str
) -> None:
    """The start of a compiled MBPO run on CUDA (both warm-ups, the first model fit, graphed
    SAC updates): no warning that capturable "can impair performance"."""
    from mbrl.trainer import Trainer

    from test_trainer import tiny_config

    overrides = {"device": device, "compile": compile, "total_steps": 300, "algorithm.name": "mbpo",
                 "mbpo.model_train_freq": 100, "rollout.batch_size": 100, "model.members": 3,
                 "model.elites": 2, "model.max_epochs": 2}  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer = Trainer(tiny_config("pendulum", **overrides), os.path.join(tmp_path, "run"))
        trainer.run()
    assert trainer.algo.sac_updates.ran.startswith(ran), trainer.algo.sac_updates.ran
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
