"""The compiled paths compute what the eager code computes: the ReLU written for the compiler,
the G-update block, the fixed-shape minibatches of the model fit, and the fallback to eager
when compiling fails; a fallback is named wherever speed is reported, and under
FLOWMBPO_STRICT=1 it raises instead (compiling, and a CUDA-graph capture through the code
path CUDA takes: on a CPU every capture fails)."""

from __future__ import annotations

import contextlib
import copy
import math
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
import torch._inductor.config as inductor_config
from test_cli import run_started
from torch import Tensor, nn

from flows.nn import ReLU
from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.bench import micro, update_bench
from mbrl.bench.update_bench import RealRows
from mbrl.compiled import FallbackError, strict
from mbrl.config import ConfigError
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.models.fit_step import minibatches
from mbrl.models.flow import FlowArchConfig
from mbrl.runtime import speed
from mbrl.runtime.speed import (
    AUTO_COMPILE_UPDATES,
    BUDGET_WARMUPS,
    COLD_WARMUP_SECONDS,
    SAC_UPDATES_PER_S,
    resolve_compile,
)
from mbrl.trainer import Trainer

from test_trainer import _rows, tiny_config
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


@contextlib.contextmanager
def no_cpp_compiler() -> Iterator[None]:
    """Inductor's CPU backend without a working C++ compiler (as on a machine without one):
    compiling fails, with a message naming the C++ compiler."""
    torch._dynamo.reset()  # (nothing compiled before may be reused)
    try:
        with inductor_config.patch({"cpp.cxx": ("no-such-c++-compiler",), "fx_graph_cache": False}):
            yield
    finally:
        torch._dynamo.reset()


def test_a_failing_compiler_warns_once_and_the_update_runs_eagerly(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiling fails: the warm-up reports why, and every update then runs eagerly, exactly
    as an agent built with compile=False."""
    monkeypatch.delenv("FLOWMBPO_STRICT", raising=False)
    cfg = SACConfig(hidden_sizes=[8, 8])
    with no_cpp_compiler():
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
    assert compiled is not None and compiled.failure is not None
    assert "C++ compiler" in compiled.failure
    assert compiled.ran == f"eager (compile failed: {compiled.failure})"
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
    params = list(model.ensemble.parameters())
    padded, _ = model.loss(x[idx[2]], y[idx[2]], weight[2])
    got = torch.autograd.grad(padded, params)
    tail = order[:, 64:]
    partial, _ = model.loss(x[tail], y[tail])
    want = torch.autograd.grad(partial, params)
    torch.testing.assert_close(padded, partial)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_compiled_fit_epoch_matches_eager(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled fit step (compiled indeed: strict mode) computes the eager one. The flow
    has four coupling layers, as the default: torch 2.11's CPU backend miscompiled four
    (mbrl.compiled.inductor_options), not two."""
    monkeypatch.setenv("FLOWMBPO_STRICT", "1")
    four = {"flow": FlowArchConfig(layers=4, hidden=[32], embed_hidden=[32], embed_dim=32)}
    kw = four if name == "flow" else {}
    cfg = tiny_model_config(name, members=3, elites=2, batch_size=32, **kw)
    trainers = []
    for compile in (False, True):
        torch.manual_seed(0)
        trainer = ModelTrainer(DynamicsModel(OBS, ACT, cfg), cfg, compile=compile)
        if compile:
            assert trainer.warm_up() is not None and trainer.step.ran == "compiled"
        trainers.append(trainer)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, OBS + ACT, generator=g), torch.randn(100, OBS + 1, generator=g)
    boot = torch.randint(0, 100, (3, 100), generator=g)
    losses = [t._epoch(x, y, boot, torch.Generator().manual_seed(1)) for t in trainers]
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-5)
    eager, compiled = (t.model.ensemble.parameters() for t in trainers)
    for p, q in zip(eager, compiled, strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_compile_auto_compiles_runs_long_enough_to_repay_the_warm_up() -> None:
    cpu = torch.device("cpu")
    need = AUTO_COMPILE_UPDATES["cpu"]
    assert need is not None
    g = {"algorithm.updates_per_step": 20}  # (tiny_config: 100 initial random steps)
    steps = -(-need // 20)  # env steps after the random ones that make `need` updates
    short = tiny_config(total_steps=99 + steps, **g)
    assert not resolve_compile(short, cpu, 1, "off").on
    long = tiny_config(total_steps=100 + steps, **g)
    choice = resolve_compile(long, cpu, 1, "off")
    assert choice.on and not choice.graphs and "auto" in choice.why
    eager, compiled = SAC_UPDATES_PER_S["cpu"]  # the measured gain it rests on, and says
    assert compiled > eager and f"compiled {compiled / eager:.2f}x eager" in choice.why
    # the break-even: the time the updates save repays the cold warm-up
    assert need == math.ceil(COLD_WARMUP_SECONDS["cpu"] / (1 / eager - 1 / compiled))
    forced = tiny_config(compile="true")
    assert resolve_compile(forced, cpu, 1, "off").on
    assert not resolve_compile(tiny_config(compile="false"), cpu, 1, "off").on
    # the count is the run's own (as the ETA counts it): 3 env copies round 1001 steps up to 1002
    copies = tiny_config(total_steps=1001, **{**g, "env.num_envs": 3})
    assert f"(auto: {(1002 - 100) * 20:,} SAC updates" in resolve_compile(copies, cpu, 1, "off").why
    # a resume keeps the choice its run made on this kind of device (compiled and eager
    # round apart: the resumed run is to equal the uninterrupted one), whatever is left
    for kept in (False, True):
        for cfg in (short, long):
            resumed = resolve_compile(cfg, cpu, 1, "off", kept=kept)
            assert resumed.on == kept and "as the run chose before this resume" in resumed.why
    assert resolve_compile(forced, cpu, 1, "off", kept=False).on  # (compile=true is obeyed)


def test_compile_auto_never_picks_a_path_measured_slower(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SAC_UPDATES_PER_S, "cpu", (50.0, 46.5))  # compiled 0.93x eager
    monkeypatch.setitem(AUTO_COMPILE_UPDATES, "cpu", speed._break_even("cpu"))
    cfg = tiny_config(total_steps=10**6, **{"algorithm.updates_per_step": 20})
    choice = resolve_compile(cfg, torch.device("cpu"), 1, "off")
    assert not choice.on and "the compiled SAC update, 0.93x eager measured on cpu" in choice.why


def test_compile_auto_leaves_a_short_max_minutes_to_training() -> None:
    """max_minutes bounds the warm-up too: compile=auto does not compile when the budget is
    under BUDGET_WARMUPS cold warm-ups of the device; compile=true compiles and says that
    the warm-up counts into the budget."""
    need = AUTO_COMPILE_UPDATES["cpu"]
    assert need is not None
    g = {"algorithm.updates_per_step": 20, "total_steps": 100 + need}
    for device in (torch.device("cpu"), torch.device("cuda")):  # (a decision: no GPU needed)
        edge = BUDGET_WARMUPS * COLD_WARMUP_SECONDS[device.type] / 60
        short, enough = (tiny_config(max_minutes=m, **g) for m in (0.99 * edge, edge))
        choice = resolve_compile(short, device, 1, "off")
        assert not choice.on and f"max_minutes={0.99 * edge:g} is under" in choice.why
        assert resolve_compile(enough, device, 1, "off").on
        forced = resolve_compile(tiny_config(compile="true", max_minutes=0.5), device, 1, "off")
        assert forced.on and "the warm-up counts into it" in forced.why


def test_a_run_with_a_short_max_minutes_trains_at_once(train_cmd: list[str], tmp_path: str) -> None:
    """A long run (compile=auto would compile it) under max_minutes=0.1: no compile warm-up,
    it stops after its 6 s of training with a checkpoint."""
    run = os.path.join(tmp_path, "run")
    args = ["env=pendulum", "total_steps=100000", "max_minutes=0.1", "device=cpu",
            "logger.progress=false", f"hydra.run.dir={run}"]  # fmt: skip
    proc = run_started([*train_cmd, *args], timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compile      off (auto: max_minutes=0.1 is under" in proc.stderr
    assert "compiling" not in proc.stderr and "max_minutes=0.1 reached" in proc.stderr
    assert os.path.isfile(os.path.join(run, "ckpt", "last.pt"))


def test_strict_mode_turns_a_compile_failure_into_an_error_naming_its_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWMBPO_STRICT", "1")
    with no_cpp_compiler():
        agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[8, 8]), compile=True)
        with pytest.raises(FallbackError, match="compiling the SAC update failed") as err:
            agent.warm_up()
    assert "C++ compiler" in str(err.value) and "FLOWMBPO_STRICT=1" in str(err.value)


def test_a_run_whose_compiling_fails_says_so_in_its_start_block_and_metrics(
    tmp_path: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """compile=true without a working compiler: one warning; the start block and every
    metrics line say the SAC update ran eagerly and why."""
    monkeypatch.delenv("FLOWMBPO_STRICT", raising=False)
    run = os.path.join(tmp_path, "run")
    with no_cpp_compiler(), caplog.at_level("WARNING"):
        Trainer(tiny_config(total_steps=200, compile="true"), run).run()
    start = capsys.readouterr().err
    line = next(li for li in start.splitlines() if li.strip().startswith("compile "))
    assert "SAC update eager (compile failed: " in line and "C++ compiler" in line
    assert caplog.text.count("compiling the SAC update failed") == 1
    ran = [r["speed/sac_update"] for r in _rows(run) if "speed/sac_update" in r]
    assert ran and all(r.startswith("eager (compile failed: ") for r in ran)


def test_every_bench_row_says_what_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled setting whose compiling failed is reported as eager, with the cause."""
    monkeypatch.delenv("FLOWMBPO_STRICT", raising=False)
    b = micro.Bench(torch.device("cpu"), repeats=1, warmup=0)
    variants = {
        "eager": {"amp": "off", "compile": False},
        "compiled": {"amp": "off", "compile": True},
    }
    with no_cpp_compiler():
        rows = update_bench.sac_updates(b, variants, batch_size=16, updates=1)
    assert rows["eager"]["ran"] == "eager"
    assert rows["compiled"]["ran"].startswith("eager (compile failed: ")
    assert "C++ compiler" in rows["compiled"]["ran"]


def _graphed_blocks(
    graphs: bool, blocks: int = 6
) -> tuple[SAC, list[dict[str, Tensor]], SACUpdates]:
    """``blocks`` blocks of 3 updates, graphed (on a CPU: every capture fails) or not."""
    torch.manual_seed(0)
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[16, 16], batch_size=32))
    gen = torch.Generator().manual_seed(1)
    updates = SACUpdates(agent, RealRows("cpu", 500, OBS, ACT), 32, gen, graphs=graphs)
    return agent, [updates(3) for _ in range(blocks)], updates


def test_a_graphed_block_that_runs_uncaptured_fails_in_strict_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The capture (the block's fourth call) fails, as captures do on a CPU: strict mode
    raises, naming the cause, instead of running the block uncaptured."""
    monkeypatch.setenv("FLOWMBPO_STRICT", "1")
    with pytest.raises(FallbackError, match="capturing the SAC update block") as err:
        _graphed_blocks(graphs=True)
    assert "CUDA graphs need a CUDA device" in str(err.value)


def test_a_failed_capture_warns_once_and_runs_the_eager_updates(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without strict mode the failed capture warns once; every block runs uncaptured,
    bit-identical to blocks never meant to be graphed, and says so."""
    monkeypatch.delenv("FLOWMBPO_STRICT", raising=False)
    with caplog.at_level("WARNING"):
        graphed, m_graphed, updates = _graphed_blocks(graphs=True)
    eager, m_eager, _ = _graphed_blocks(graphs=False)
    assert caplog.text.count("capturing the SAC update block as a CUDA graph failed") == 1
    assert updates.ran == (
        "eager, uncaptured (capture failed: RuntimeError: CUDA graphs need a CUDA device, not cpu)"
    )
    assert updates.replays == 0
    for a, b in zip(m_graphed, m_eager, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    for p, q in zip(graphed.critic.parameters(), eager.critic.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("value", ["yes", "true", "2"])
def test_strict_mode_takes_only_0_or_1(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWMBPO_STRICT", value)
    with pytest.raises(ConfigError, match=f"FLOWMBPO_STRICT='{value}' is not allowed; use 1"):
        strict()


def test_an_error_of_the_function_itself_is_raised_not_hidden() -> None:
    """A warm-up that fails eagerly too is the function's own error: raised, before the run."""
    from mbrl.compiled import Compiled

    def broken(x: Tensor) -> Tensor:
        return x @ torch.ones(3, 3)  # wrong shapes for x [4, 2]

    compiled = Compiled(broken, "a broken loss")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        compiled.warm_up(lambda: compiled(torch.ones(4, 2)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the note is torch's for GPU-less machines")
@pytest.mark.parametrize("quieted", [False, True])
def test_no_cuda_runtime_note_is_kept_out_of_a_cpu_runs_output(
    quieted: bool, tmp_path: str
) -> None:
    """A CUDA toolkit without a GPU (CUDA_HOME set, as an ``nvcc`` on the PATH sets it) makes
    ``torch.utils.cpp_extension``, which inductor's CPU backend loads, warn "No CUDA runtime is
    found". Importing mbrl.compiled drops that one note; without it the note shows (so the
    check can fail)."""
    first = "import mbrl.compiled; " if quieted else ""
    code = first + "import torch.utils.cpp_extension as c; c._find_cuda_home()"
    env = {**os.environ, "CUDA_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ("No CUDA runtime is found" in done.stderr) is not quieted, done.stderr
