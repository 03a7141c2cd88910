"""The compiled paths compute what the eager code computes: the ReLU written for the compiler,
the G-update block, the fixed-shape minibatches of the model fit, and the fallback to eager
when compiling fails."""

from __future__ import annotations

import copy

import pytest
import torch
import torch._inductor.config as inductor_config
from torch import Tensor, nn

from flows.nn import ReLU
from mbrl.agents import SAC, SACUpdates
from mbrl.config import SACConfig
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.models.fit_step import minibatches
from mbrl.runtime.speed import AUTO_COMPILE_UPDATES, resolve_compile
from mbrl.tools.update_bench import RealRows

from test_trainer import tiny_config
from tests_support import tiny_model_config

OBS, ACT = 5, 2


def test_relu_written_for_the_compiler_has_torchs_values_and_gradients() -> None:
    """Eager it is torch.relu; compiled, its backward (grad * sign(out)) equals nn.ReLU's,
    zeros included."""
    x = torch.randn(64, 32)
    x[0, :8] = 0.0
    w = torch.randn(32, 16)

    def f(act: nn.Module, x: Tensor) -> Tensor:
        return (act(x @ torch.eye(32)) @ w).square().sum()

    grads = []
    for fn in (f, torch.compile(f)):
        xi = x.clone().requires_grad_()
        out = fn(ReLU(), xi)
        out.backward()
        grads.append((out.detach(), xi.grad))
    xr = x.clone().requires_grad_()
    ref = f(nn.ReLU(), xr)
    ref.backward()
    for out, grad in grads:
        torch.testing.assert_close(out, ref.detach())
        torch.testing.assert_close(grad, xr.grad)


def test_the_block_is_n_updates_on_sampled_batches() -> None:
    """SACUpdates(n) samples a batch and updates, n times: bit-identical to doing it by hand."""
    cfg = SACConfig(hidden_sizes=[16, 16], batch_size=32)
    torch.manual_seed(0)
    a, b = SAC(OBS, ACT, cfg), SAC(OBS, ACT, cfg)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    rows_a, rows_b = RealRows("cpu", 500, OBS, ACT), RealRows("cpu", 500, OBS, ACT)
    gen_a, gen_b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    metrics = SACUpdates(a, rows_a, 32, gen_a)(5)
    for _ in range(5):
        last = b.update(rows_b.batch(32, gen_b), gen_b)
    for key in last:
        assert torch.equal(metrics[key], last[key]), key
    for p, q in zip(a.critic.parameters(), b.critic.parameters(), strict=True):
        assert torch.equal(p, q)
    assert rows_a.real.sampled_out == rows_b.real.sampled_out == 5 * 32


def test_a_failing_compiler_warns_once_and_the_update_runs_eagerly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No working C++ compiler (as on a machine without one): the warm-up reports why, and
    every update then runs eagerly, exactly as an agent built with compile=False."""
    torch._dynamo.reset()  # (nothing compiled before may be reused)
    cfg = SACConfig(hidden_sizes=[8, 8])
    try:
        with inductor_config.patch({"cpp.cxx": ("no-such-c++-compiler",), "fx_graph_cache": False}):
            torch.manual_seed(0)
            agent = SAC(OBS, ACT, cfg, compile=True)
            with caplog.at_level("WARNING"):
                compiled = agent.warm_up()
                batches = [
                    RealRows("cpu", 500, OBS, ACT).batch(16, torch.Generator().manual_seed(i))
                    for i in range(3)
                ]
                for i, batch in enumerate(batches):
                    agent.update(batch, torch.Generator().manual_seed(i))
    finally:
        torch._dynamo.reset()
    assert compiled is not None and compiled.failure is not None
    assert "C++ compiler" in compiled.failure
    assert caplog.text.count("compiling the SAC update failed") == 1
    torch.manual_seed(0)
    eager = SAC(OBS, ACT, cfg)
    for i, batch in enumerate(batches):
        eager.update(batch, torch.Generator().manual_seed(i))
    for p, q in zip(eager.actor.parameters(), agent.actor.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_a_padded_minibatch_trains_on_bnns_partial_batch(name: str) -> None:
    """An epoch of 70 rows in minibatches of 32: the last minibatch is padded to 32 rows of
    weight 0; its loss and gradients equal those of the 6-row batch bnn.py would train on."""
    torch.manual_seed(0)
    model = DynamicsModel(3, 1, tiny_model_config(name, members=2, elites=1))
    order = torch.stack([torch.randperm(70), torch.randperm(70)])
    idx, weight = minibatches(order, 32, 3)
    assert idx.shape == weight.shape == (3, 2, 32)
    assert weight[:2].eq(1).all() and weight[2, :, :6].eq(1).all() and weight[2, :, 6:].eq(0).all()
    assert torch.equal(idx.transpose(0, 1).reshape(2, 96)[:, :70], order)
    x, y = torch.randn(70, 4), torch.randn(70, 4)
    params = list(model.density.parameters())
    padded, _ = model.loss(x[idx[2]], y[idx[2]], weight[2])
    got = torch.autograd.grad(padded, params)
    tail = order[:, 64:]
    partial, _ = model.loss(x[tail], y[tail])
    want = torch.autograd.grad(partial, params)
    torch.testing.assert_close(padded, partial)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_compiled_fit_epoch_matches_eager(name: str) -> None:
    cfg = tiny_model_config(name, members=3, elites=2, batch_size=32)
    trainers = []
    for compile in (False, True):
        torch.manual_seed(0)
        trainer = ModelTrainer(DynamicsModel(OBS, ACT, cfg), cfg, compile=compile)
        if compile:
            assert trainer.warm_up() is not None
        trainers.append(trainer)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, OBS + ACT, generator=g), torch.randn(100, OBS + 1, generator=g)
    boot = torch.randint(0, 100, (3, 100), generator=g)
    losses = [t._epoch(x, y, boot, torch.Generator().manual_seed(1)) for t in trainers]
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-5)
    eager, compiled = (t.model.density.parameters() for t in trainers)
    for p, q in zip(eager, compiled, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_compile_auto_compiles_runs_long_enough_to_repay_the_warm_up() -> None:
    cpu = torch.device("cpu")
    need = AUTO_COMPILE_UPDATES["cpu"]
    g = {"algorithm.updates_per_step": 20}  # (tiny_config: 100 initial random steps)
    short = tiny_config(total_steps=99 + need // 20, **g)
    assert not resolve_compile(short, cpu, 1, "off").on
    long = tiny_config(total_steps=100 + need // 20, **g)
    choice = resolve_compile(long, cpu, 1, "off")
    assert choice.on and not choice.graphs and "auto" in choice.why
    forced = tiny_config(compile="true")
    assert resolve_compile(forced, cpu, 1, "off").on
    assert not resolve_compile(tiny_config(compile="false"), cpu, 1, "off").on


def test_an_error_of_the_function_itself_is_raised_not_hidden() -> None:
    """A warm-up that fails eagerly too is the function's own error: raised, before the run."""
    from mbrl.compiled import Compiled

    def broken(x: Tensor) -> Tensor:
        return x @ torch.ones(3, 3)  # wrong shapes for x [4, 2]

    compiled = Compiled(broken, "a broken loss")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        compiled.warm_up(lambda: compiled(torch.ones(4, 2)))
