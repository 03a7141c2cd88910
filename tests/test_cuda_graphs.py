"""On a GPU the G-update block and the model-fit step run as CUDA graph replays (captured and
replayed: strict mode, set for these tests, turns a fallback into an error): they compute the
eager updates (to within the compiled kernels' rounding), never wait for the device, and the
phase timers and the acting copy do not either. A capture that fails leaves the stream as it
was. Skipped without CUDA."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor

from mbrl.agents import SAC, ActingPolicy, SACConfig, SACUpdates
from mbrl.bench.update_bench import RealRows
from mbrl.compiled import FallbackError, GraphedStep, tf32_matmuls
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.runtime.timer import PhaseTimer

from tests_support import tiny_model_config

pytestmark = pytest.mark.cuda
OBS, ACT = 11, 3
# Compiled (fused) kernels round differently from eager ones; over a few dozen updates the
# weights stay this close.
RTOL, ATOL = 1e-3, 1e-4


def _blocks(
    compile: bool, graphs: bool, blocks: int = 8, tf32: bool = False
) -> tuple[SAC, dict[str, Tensor], SACUpdates]:
    dev = torch.device("cuda")
    torch.manual_seed(0)
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[64, 64], batch_size=64), dev, "off", compile)
    with tf32_matmuls(tf32):
        agent.warm_up()
    gen = torch.Generator(device=dev).manual_seed(1)
    updates = SACUpdates(agent, RealRows(dev, 2000, OBS, ACT), 64, gen, graphs, tf32)
    metrics: dict[str, Tensor] = {}
    for _ in range(blocks):
        metrics = updates(5)
    return agent, {k: v.clone() for k, v in metrics.items()}, updates


@pytest.mark.mechanism
def test_the_graphed_block_equals_the_eager_updates() -> None:
    """Eight blocks of 5 updates: 3 eager warm-up blocks, a capture, then replays; the same
    batches and noise (the generator advances through replays as eagerly), the same
    weights to within RTOL / ATOL."""
    eager, m_eager, _ = _blocks(compile=False, graphs=False)
    graphed, m_graphed, updates = _blocks(compile=True, graphs=True)
    assert updates.ran == "compiled, graphed" and updates.replays == 8 - 3  # captured, replayed
    for key in m_eager:
        torch.testing.assert_close(m_graphed[key], m_eager[key], rtol=RTOL, atol=ATOL)
    for net in ("actor", "critic", "critic_target"):
        nets = (getattr(eager, net).parameters(), getattr(graphed, net).parameters())
        for p, q in zip(*nets, strict=True):
            torch.testing.assert_close(q, p, rtol=RTOL, atol=ATOL)


@pytest.mark.mechanism
def test_sac_on_tf32_stays_within_the_fp32_tolerance() -> None:
    """tf32=true runs the SAC block's fp32 matmuls on TF32: after 5 blocks of 5 updates (the
    fifth a replay) the losses stay within 1 % of fp32's."""
    _, m_fp32, _ = _blocks(compile=True, graphs=True, blocks=5)
    _, m_tf32, updates = _blocks(compile=True, graphs=True, blocks=5, tf32=True)
    assert updates.ran == "compiled, graphed"
    for key in ("q_loss", "actor_loss", "alpha"):
        torch.testing.assert_close(m_tf32[key], m_fp32[key], rtol=1e-2, atol=1e-3)


@pytest.mark.mechanism
@pytest.mark.parametrize("strict", ["1", "0"])
def test_a_failed_capture_leaves_the_stream_as_it_was(
    strict: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that waits for the device (``.item()``) cannot be captured: strict mode raises,
    naming the cause; otherwise the step runs uncaptured. Either way the caller's stream is
    current again, and the uncaptured step computes what the step computes."""
    monkeypatch.setenv("FLOWMBPO_STRICT", strict)
    dev = torch.device("cuda")
    x = torch.ones(4, device=dev)

    def step() -> Tensor:
        x.mul_(2.0)
        return x.sum() + x.sum().item()  # the read-back: no graph can hold it

    graphed = GraphedStep(step, [], dev, "a step that syncs", warmup=1)
    before = torch.cuda.current_stream(dev)
    graphed()  # the uncaptured warm-up call
    if strict == "1":
        with pytest.raises(FallbackError, match="capturing a step that syncs"):
            graphed()
    else:
        out = graphed()
        assert graphed.ran.startswith("uncaptured (capture failed: ")
        torch.cuda.synchronize()
        assert out.item() == 2 * x.sum().item()  # the step ran, uncaptured
    assert torch.cuda.current_stream(dev) == before
    assert not torch.cuda.is_current_stream_capturing()


@pytest.mark.mechanism
def test_replays_never_sync() -> None:
    dev = torch.device("cuda")
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[64, 64], batch_size=64), dev, "off", True)
    rows = RealRows(dev, 2000, OBS, ACT)
    updates = SACUpdates(agent, rows, 64, torch.Generator(device=dev).manual_seed(1), True)
    for _ in range(5):  # warm-up blocks and the capture
        updates(20)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            metrics = updates(20)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(metrics["q_loss"]).item()
    assert updates.ran == "compiled, graphed" and updates.replays == 8 - 3
    assert rows.real.sampled_out == 8 * 20 * 64  # device counters count replays too


@pytest.mark.parametrize("name", [pytest.param("flow", marks=pytest.mark.mechanism), "gaussian"])
def test_the_graphed_fit_epoch_equals_the_eager_one(name: str) -> None:
    dev = torch.device("cuda")
    cfg = tiny_model_config(name, members=3, elites=2, batch_size=64)
    trainers = []
    for compile, graphs in ((False, False), (True, True)):
        torch.manual_seed(0)
        trainer = ModelTrainer(DynamicsModel(OBS, ACT, cfg).to(dev), cfg, "off", compile, graphs)
        trainer.warm_up()
        trainers.append(trainer)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(500, OBS + ACT, generator=g), torch.randn(500, OBS + 1, generator=g)
    boot = torch.randint(0, 500, (3, 500), generator=g)
    x, y, boot = x.to(dev), y.to(dev), boot.to(dev)
    for epoch in range(3):  # 8 minibatches each: the capture happens in the first epoch
        losses = [t._epoch(x, y, boot, torch.Generator(dev).manual_seed(epoch)) for t in trainers]
        torch.testing.assert_close(losses[1], losses[0], rtol=RTOL, atol=ATOL)
    assert trainers[1].step.ran == "compiled, graphed" and trainers[1].step.replays > 0
    eager, graphed = (t.model.ensemble.parameters() for t in trainers)
    for p, q in zip(eager, graphed, strict=True):
        torch.testing.assert_close(q, p, rtol=RTOL, atol=ATOL)


def test_tf32_fit_stays_within_the_fp32_tolerance() -> None:
    """TF32 matmuls for the model fit: the epoch's loss stays within 1 % of fp32's."""
    dev = torch.device("cuda")
    cfg = tiny_model_config("flow", members=3, elites=2, batch_size=64)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(500, OBS + ACT, generator=g), torch.randn(500, OBS + 1, generator=g)
    boot = torch.randint(0, 500, (3, 500), generator=g)
    losses = []
    for tf32 in (False, True):
        torch.manual_seed(0)
        trainer = ModelTrainer(DynamicsModel(OBS, ACT, cfg).to(dev), cfg)
        with tf32_matmuls(tf32):
            losses.append(trainer._epoch(x.to(dev), y.to(dev), boot.to(dev), torch.Generator(dev)))
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-2, atol=1e-3)


@pytest.mark.mechanism
def test_phase_timers_record_events_without_waiting() -> None:
    timer = PhaseTimer(torch.device("cuda"))
    a = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            with timer.phase("sac"):
                a = a @ a / 1024
            with timer.phase("env"):
                pass
    finally:
        torch.cuda.set_sync_debug_mode("default")
    metrics = timer.metrics()  # (reads the events: the one wait)
    assert metrics["time/sac"] > 0 and "time/env" in metrics


@pytest.mark.mechanism
def test_the_acting_copy_gets_the_weights_of_its_refresh() -> None:
    """The refresh queues a non-blocking copy; the next action uses exactly the weights the
    training actor had when the refresh was queued, not later ones."""
    dev = torch.device("cuda")
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[64, 64], batch_size=64), dev)
    acting = ActingPolicy(agent, torch.device("cpu"), sync_every=1)
    rows, gen = RealRows(dev, 2000, OBS, ACT), torch.Generator(device=dev).manual_seed(0)
    agent.update(rows.batch(64, gen), gen)
    expected = copy.deepcopy(agent.actor.state_dict())
    acting.step()  # refresh: queued behind the update
    agent.update(rows.batch(64, gen), gen)  # a later update must not reach the copy
    acting.act(torch.zeros(1, OBS), deterministic=True, generator=None)
    assert acting.copy is not None
    for key, value in acting.copy.state_dict().items():
        assert torch.equal(value, expected[key].cpu()), key


@pytest.mark.mechanism
def test_a_batch_of_seeds_graphed_equals_its_solo_agents_eager() -> None:
    """Three seeds batched (mbrl.agents.seed_batch), compiled and captured as one CUDA graph
    per block, against each seed's solo agent eager: 8 blocks of 5 updates (3 warm-up
    blocks, a capture, replays that advance each seed's generator), the same weights to
    within RTOL / ATOL."""
    from mbrl.agents.seed_batch import SeedBatch, SeedUpdates

    dev, cfg = torch.device("cuda"), SACConfig(hidden_sizes=[64, 64], batch_size=64)
    agents = []
    for s in range(3):
        torch.manual_seed(s)
        agents.append(SAC(OBS, ACT, cfg, dev))
    twins = [copy.deepcopy(a) for a in agents]
    rows = [RealRows(dev, 2000, OBS, ACT) for _ in agents]

    def gens() -> list[torch.Generator]:
        return [torch.Generator(device=dev).manual_seed(10 + s) for s in range(3)]

    batch = SeedBatch(agents, compile=True)
    batch.warm_up()
    batched = SeedUpdates(batch, rows, 64, gens(), graphs=True)
    solo = [SACUpdates(a, r, 64, g) for a, r, g in zip(twins, rows, gens(), strict=True)]
    for _ in range(8):
        batched(5)
        for block in solo:
            block(5)
    assert batched.ran == "compiled, graphed" and batched.replays == 8 - 3
    for state, twin in zip(batch.state_dicts(), twins, strict=True):
        for name, w in twin.actor.state_dict().items():
            torch.testing.assert_close(state["actor"][name], w, rtol=RTOL, atol=ATOL)


@pytest.mark.mechanism
@pytest.mark.parametrize("name", ["flow", "gaussian"])
def test_batched_seed_fits_graphed_equal_their_solo_fits_eager(name: str) -> None:
    """Three seeds' model fits batched (mbrl.models.seed_fit), compiled and each minibatch
    step one CUDA graph replay, against each seed's solo fit eager: two epochs on 500, 600
    and 450 rows (8, 10 and 8 minibatches of 64: the seeds sit out different steps), the same
    weights and epochs to within RTOL / ATOL."""
    from mbrl.models.seed_fit import SeedFits

    dev = torch.device("cuda")
    cfg = tiny_model_config(name, members=3, elites=2, batch_size=64, max_epochs=2)

    def trainers() -> list[ModelTrainer]:
        out = []
        for s in range(3):
            torch.manual_seed(s)
            out.append(ModelTrainer(DynamicsModel(OBS, ACT, cfg).to(dev), cfg))
        return out

    solo, fits = trainers(), SeedFits(trainers(), compile=True, graphs=True)
    fits.warm_up()
    data = []
    for s, n in enumerate((500, 600, 450)):
        g = torch.Generator().manual_seed(s)
        obs, act = torch.randn(n, OBS, generator=g), torch.rand(n, ACT, generator=g) * 2 - 1
        rows = {"obs": obs, "act": act, "next_obs": obs + 0.1 * obs.sin(), "rew": obs[:, 0]}
        data.append({k: v.to(dev) for k, v in rows.items()})

    def gens() -> list[torch.Generator]:
        return [torch.Generator(dev).manual_seed(10 + s) for s in range(3)]

    want = [
        t.fit(d["obs"], d["act"], d["next_obs"], d["rew"], g)
        for t, d, g in zip(solo, data, gens(), strict=True)
    ]
    got = fits.fit(data, gens())
    assert fits.ran == "compiled, graphed" and fits.replays > 0
    for a, b, wa, wb in zip(solo, fits.trainers, want, got, strict=True):
        assert wa is not None
        assert wa["model/epochs"] == wb["model/epochs"] == 2
        for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=RTOL, atol=ATOL)
