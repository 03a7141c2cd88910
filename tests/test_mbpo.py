"""The MBPO loop in-process: model phases, mixed batches, run folder, bit-exact resume."""

from __future__ import annotations

import copy
import json
import math
import os
from typing import Any

import pytest
import torch

from mbrl.config import Config
from mbrl.envs.vector import make_vector_env
from mbrl.mbpo import MBPO, Step
from mbrl.model_side import ModelSide
from mbrl.runtime.capacity import checkpoint_sizes
from mbrl.runtime.checkpoint import load
from mbrl.schedule import rollout_length
from mbrl.trainer import Trainer

from test_trainer import _comparable, _rows, tiny_config

MBPO_TINY = {
    "algorithm.name": "mbpo",
    "algorithm.init_steps": 100,
    "mbpo.model_train_freq": 100,
    "algorithm.updates_per_step": 2,
    "mbpo.real_ratio": 0.25,
    "mbpo.epoch_length": 100,
    "rollout.batch_size": 64,
    "rollout.min_epoch": 1,
    "rollout.max_epoch": 3,
    "rollout.min_length": 1,
    "rollout.max_length": 3,
    "model.members": 3,
    "model.elites": 2,
    "model.max_epochs": 3,
    "model.flow.layers": 2,
    "model.flow.hidden": [16],
    "model.flow.embed_hidden": [16],
    "model.flow.embed_dim": 16,
}


def mbpo_config(**overrides: object) -> Config:
    return tiny_config("hopper", **{**MBPO_TINY, **overrides})


def test_mbpo_run_logs_model_phases(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(
        mbpo_config(
            **{
                "rewarder.mode": "penalty",
                "rewarder.steps": 3,
                "rewarder.flow.layers": 1,
                "rewarder.flow.hidden": [8],
            }
        ),
        run,
    )
    assert isinstance(trainer.algo.model_side, ModelSide)
    trainer.run()
    rows = _rows(run)
    phases = [r for r in rows if "model/holdout_nll" in r]
    assert [r["step"] for r in phases] == [100, 200, 300]
    # MBPO's epochs count from init_steps=100: steps 100, 200, 300 are epochs 0, 1, 2, and
    # the schedule [1, 3, 1, 3] gives 1 up to epoch 1, then int(1 + 2 * (2 - 1) / 2) = 2.
    assert [r["rollout/length"] for r in phases] == [1, 1, 2]
    for key in (
        "model/train_loss",
        "model/holdout_mse",
        "model/epochs",
        "rewarder/loss",
        "rewarder/x_model_p50",
        "rollout/transitions",
        "rollout/pool_size",
    ):
        assert all(key in r for r in phases), key
    with open(os.path.join(run, "log", "model", "model.log"), encoding="utf-8") as f:
        assert "holdout_nll" in f.read()
    state = load(os.path.join(run, "ckpt", "last.pt"))
    assert state["buffers"]["model"]["size"] > 0 and state["algorithm"]["rewarder"] is not None
    assert state["updates"] == 2 * 300


def test_batches_mix_real_and_model_rows(tmp_path: str) -> None:
    trainer = Trainer(mbpo_config(total_steps=100), os.path.join(tmp_path, "run"))
    trainer.run()
    mbpo = trainer.algo.model_side
    assert isinstance(mbpo, ModelSide)
    mbpo.model_phase(100, trainer.algo.gens["train"], trainer.timer)
    real, pool = mbpo.real, mbpo.pool
    # Each row's first observation entry names its buffer and row: +(j + 1) real, -(j + 1) pool
    for buffer, sign in ((real, 1.0), (pool, -1.0)):
        rows = buffer.data["obs"].shape[0]
        buffer.data["obs"][:, 0] = sign * torch.arange(1, rows + 1, dtype=torch.float32)
    batch = mbpo.batch(32, torch.Generator().manual_seed(0))
    assert set(batch) == {"obs", "act", "rew", "next_obs", "terminated"}
    mark = batch["obs"][:, 0].long()
    assert int((mark < 0).sum()) == 32 - int(32 * 0.25)
    # every field of a batch row is the same row's, in either buffer
    for i, m in enumerate(mark.tolist()):
        source, j = (real, m - 1) if m > 0 else (pool, -m - 1)
        assert j < int(source.size)
        for field, values in batch.items():
            assert torch.equal(values[i], source.data[field][j]), (field, i)
    # A changed split is a new layout (a graphed update block is captured per layout)
    layout = mbpo.batch_layout()
    mbpo.n_real = 3
    assert mbpo.batch_layout() != layout
    assert int((mbpo.batch(32, torch.Generator())["obs"][:, 0] > 0).sum()) == 3


def test_mbpo_resume_equals_uninterrupted(tmp_path: str) -> None:
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    Trainer(mbpo_config(), full).run()
    Trainer(mbpo_config(total_steps=200), split).run()
    Trainer(mbpo_config(total_steps=400, resume=split), split).run()
    a, b = load(os.path.join(full, "ckpt", "last.pt")), load(os.path.join(split, "ckpt", "last.pt"))
    for key, value in a["algorithm"]["model"].items():
        assert torch.equal(value, b["algorithm"]["model"][key]), key
    for key, value in a["agent"]["actor"].items():
        assert torch.equal(value, b["agent"]["actor"][key]), key
    for key, value in a["buffers"]["model"]["data"].items():
        assert torch.equal(value, b["buffers"]["model"]["data"][key]), key
    assert _strip(_rows(full)) == _strip(_rows(split))


def test_a_run_without_the_pool_in_its_checkpoints_resumes(tmp_path: str) -> None:
    """checkpoint.pool=false: last.pt holds no model pool (and the disk estimate counts
    none); the resumed run refills it and finishes; up to the resume the metrics are the
    uninterrupted run's."""
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    slim = {"checkpoint.pool": False}
    Trainer(mbpo_config(), full).run()
    Trainer(mbpo_config(total_steps=200, **slim), split).run()
    state = load(os.path.join(split, "ckpt", "last.pt"))
    assert set(state["buffers"]) == {"real"}
    sizes = [checkpoint_sizes(mbpo_config(**{"checkpoint.pool": p}), 11, 3) for p in (True, False)]
    assert sizes[1].full < sizes[0].full
    Trainer(mbpo_config(total_steps=400, resume=split, **slim), split).run()
    rows = _strip(_rows(split))
    learner = [r for r in rows if "learner/updates" in r]
    assert learner[-1]["step"] == 400 and learner[-1]["learner/updates"] == (400 - 100) * 2
    before = [r for r in _strip(_rows(full)) if r["step"] <= 200]
    assert rows[: len(before)] == before


def _strip(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """Everything but wall-clock quantities."""
    return [{k: v for k, v in r.items() if k != "model/fit_seconds"} for r in _comparable(rows)]


def test_metrics_file_parses(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    Trainer(mbpo_config(total_steps=200), run).run()
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert all("step" in r for r in rows)
    machine = {r["speed/device"] for r in rows if "speed/device" in r}  # (a figure's title)
    assert machine == {f"CPU ({os.cpu_count()} cores)"}


@pytest.mark.cuda
@pytest.mark.mechanism
def test_cuda_compiled_run(tmp_path: str) -> None:
    """compile=true on a GPU: the SAC block and the model-fit step as CUDA graphs, as
    metrics.jsonl records."""
    run = os.path.join(tmp_path, "run")
    cfg = mbpo_config(total_steps=300, device="cuda", compile="true")
    assert math.isfinite(Trainer(cfg, run).run())
    rows = [r for r in _rows(run) if "learner/q_loss" in r]
    assert rows and all(math.isfinite(r["learner/q_loss"]) for r in rows)
    assert rows[-1]["speed/sac_update"] == "compiled, graphed"  # (logged with the losses)
    assert rows[-1]["speed/model_fit"] == "compiled, graphed"
    assert rows[-1]["speed/device"] == torch.cuda.get_device_name()


def test_bench_times_a_trained_agent_both_ways(tmp_path: str) -> None:
    from mbrl.bench.loop_bench import trained_sac_update
    from mbrl.bench.micro import Bench

    trainer = Trainer(mbpo_config(total_steps=100), os.path.join(tmp_path, "run"))
    trainer.run()
    assert isinstance(trainer.algo.model_side, ModelSide)
    trainer.algo.model_side.model_phase(100, trainer.algo.gens["train"], trainer.timer)
    before = {k: v.clone() for k, v in trainer.algo.agent.actor.state_dict().items()}
    rates = trained_sac_update(Bench(torch.device("cpu"), repeats=1, warmup=0), trainer, 2)
    assert set(rates) == {"flush", "keep"} and all(r > 0 for r in rates.values())
    for key, value in trainer.algo.agent.actor.state_dict().items():
        assert torch.equal(value, before[key]), "the timed copies must not train the agent"


def _algo(cfg: Config) -> MBPO:
    envs = make_vector_env(cfg.env.name, 1, "sync", cfg.env.max_episode_steps)
    return MBPO(cfg, envs, torch.device("cpu"))


def test_the_algorithm_object_alone_resumes_from_its_state_dict() -> None:
    """MBPO without a trainer: stepped to 250 steps (two model phases, SAC updates from step
    100), its state_dict() loaded into a fresh object, and both stepped on to 320: the same
    weights, buffers, pool, counters and last metrics as an object stepped uninterrupted."""
    cfg = mbpo_config(total_steps=320)
    first, whole = _algo(cfg), _algo(cfg)
    for algo in (first, whole):
        while algo.env_steps < 250:
            algo.step()
    phases = 0
    resumed = _algo(cfg)
    resumed.load_state_dict(copy.deepcopy(first.state_dict()))
    first.close()
    last: dict[str, Step] = {}
    for name, algo in (("resumed", resumed), ("whole", whole)):
        while algo.env_steps < 320:
            step = algo.step()
            phases += step.model is not None
            last[name] = step
        assert algo.updates == (320 - 100) * 2
    assert phases == 2  # (the model phase at step 300, once per object)
    a, b = resumed.state_dict(), whole.state_dict()
    for key in ("agent", "algorithm"):
        flat_a, flat_b = _flat(a[key]), _flat(b[key])
        assert flat_a.keys() == flat_b.keys()
        for k, v in flat_a.items():
            assert torch.equal(v, flat_b[k]) if isinstance(v, torch.Tensor) else v == flat_b[k], k
    # The buffers' rows, oldest first (a loaded ring is stored compacted: its write position
    # differs, its rows do not).
    for name, buffer in whole.buffers().items():
        rows_a, rows_b = resumed.buffers()[name].rows(), buffer.rows()
        assert rows_b["obs"].shape[0] > 0, name
        assert all(torch.equal(rows_a[k], rows_b[k]) for k in rows_b), name
    sac_a, sac_b = last["resumed"].sac, last["whole"].sac
    assert sac_a is not None and sac_b is not None
    assert all(torch.equal(sac_a[k], sac_b[k]) for k in sac_b)
    for algo in (resumed, whole):
        algo.close()


def _flat(obj: object, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    if isinstance(obj, list | tuple):
        return _flat(dict(enumerate(obj)), prefix)
    return {prefix: obj}


def test_a_state_without_the_pool_refills_it_at_the_next_step() -> None:
    """checkpoint.pool=false's state: no model pool; the resumed object rolls the saved model
    out once before its next step's updates (one model phase's rows), then goes on."""
    cfg = mbpo_config(total_steps=400)
    algo = _algo(cfg)
    while algo.env_steps < 250:
        algo.step()
    state = algo.state_dict(pool=False)
    assert set(state["buffers"]) == {"real"} and set(algo.state_dict()["buffers"]) == {
        "real",
        "model",
    }
    resumed = _algo(cfg)
    resumed.load_state_dict(copy.deepcopy(state))
    side = resumed.model_side
    assert isinstance(side, ModelSide)
    pool = side.pool
    assert pool.size == 0 and not side.pool_ready  # (batches: D_env alone)
    # the same weights go on: the agent's and the model's were loaded
    for part in ("agent", "algorithm"):
        saved, loaded = _flat(state[part]), _flat(resumed.state_dict()[part])
        assert all(torch.equal(v, loaded[k]) for k, v in saved.items() if torch.is_tensor(v))
    step = resumed.step()
    # the rollouts of the last model phase (step 200: epoch 1 of 100 steps, length 1 ... 3)
    length = rollout_length(200, cfg)
    assert step.model is None and step.sac is not None
    assert 0 < pool.size <= cfg.rollout.batch_size * length
    assert resumed.model_side.pool_ready
    while resumed.env_steps < 320:
        assert resumed.step().sac is not None
    for a in (algo, resumed):
        a.close()
