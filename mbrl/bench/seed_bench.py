"""The batched-seeds rows of ``scripts/bench.py --seed-batch S,...`` (docs/benchmarks.md, "Seeds
batched in one process"): per S, S solo SAC update blocks or model fits one after another
(what S runs in one process would do, and about what S processes time-sliced on one GPU do)
against one batched block (``mbrl.agents.seed_batch``) or fit (``mbrl.models.seed_fit``) for
the S seeds, side by side in the same rounds; ``ran`` says what each ran."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.agents.seed_batch import SeedBatch, SeedUpdates
from mbrl.bench.micro import ACT, OBS, Bench, hopper_rows
from mbrl.bench.update_bench import WARM_BLOCKS, RealRows
from mbrl.compiled import tf32_matmuls
from mbrl.models.dynamics import DynamicsModel
from mbrl.models.model_registry import model_config
from mbrl.models.seed_fit import SeedFits
from mbrl.models.training import ModelTrainer


def seed_batches(
    b: Bench, sizes: list[int], batch_size: int = 256, updates: int = 20
) -> dict[str, dict[str, Any]]:
    """Per S in ``sizes``: updates/s per seed and together, solo blocks vs one batched block,
    and the batched block's time against the solo blocks' (``time_vs_solo``). On CUDA both
    compiled and graphed with TF32 matmuls (as a run's defaults there); eager on a CPU."""
    cuda = b.device.type == "cuda"
    out: dict[str, dict[str, Any]] = {}
    for seeds in sizes:
        solo, batched = _blocks(b.device, seeds, batch_size, cuda)
        with tf32_matmuls(cuda):
            for _ in range(WARM_BLOCKS):
                batched(updates)
                for block in solo:
                    block(updates)
            fns: dict[str, Callable[[], object]] = {
                "solo": partial(_each, solo, updates),
                "batched": partial(batched, updates),
            }
            t = b.side_by_side(fns, max(2 * b.repeats, 5))
        ran = {"ran_solo": solo[0].ran, "ran": batched.ran}
        out[f"S={seeds}"] = {"seeds": seeds, **ran, **_rates(t, updates, seeds, "updates")}
    return out


def fit_batches(
    b: Bench, sizes: list[int], model: str = "flow", rows: int = 5000, epochs: int = 2
) -> dict[str, dict[str, Any]]:
    """Per S in ``sizes``: S solo model fits of ``epochs`` epochs on ``rows`` transitions each
    (the seeds' rows differ slightly in number, as in a run) against one batched fit; fit
    minibatch steps per second per seed and together, and the batched fit's time against the
    solo fits'. On CUDA compiled and graphed with TF32 (a run's defaults), eager on a CPU."""
    cuda = b.device.type == "cuda"
    cfg = model_config(model, max_epochs=epochs)
    out: dict[str, dict[str, Any]] = {}
    for seeds in sizes:
        data = [hopper_rows(rows - 7 * s, b.device) for s in range(seeds)]
        solo = [_trainer(cfg, b.device, cuda) for _ in data]
        batched = SeedFits([_trainer(cfg, b.device, cuda) for _ in data], compile=cuda, graphs=cuda)
        with tf32_matmuls(cuda):
            batched.warm_up()
            for trainer in solo:
                trainer.warm_up()
            fns: dict[str, Callable[[], object]] = {
                "solo": partial(_solo_fits, solo, data),
                "batched": partial(batched.fit, data, _gens(b.device, seeds)),
            }
            t = b.side_by_side(fns, max(b.repeats, 3))
        steps = epochs * -(-int(0.8 * rows) // cfg.batch_size)  # (about: train rows / batch)
        ran = {"ran_solo": solo[0].step.ran, "ran": batched.ran}
        out[f"S={seeds}"] = {"seeds": seeds, **ran, **_rates(t, steps, seeds, "steps")}
    return out


def _rates(t: dict[str, list[float]], work: int, seeds: int, unit: str) -> dict[str, float]:
    """``work`` units per second per seed and for all seeds, solo and batched, from the
    side-by-side times ``t``; and the batched time against the solo time (median of rounds)."""
    row: dict[str, float] = {}
    for name, times in t.items():
        per_seed = work / statistics.median(times)
        row[f"{name}_{unit}_per_s_per_seed"] = per_seed
        row[f"{name}_{unit}_per_s_all"] = per_seed * seeds
    pairs = zip(t["batched"], t["solo"], strict=True)
    row["time_vs_solo"] = statistics.median(x / y for x, y in pairs)
    return row


def _trainer(cfg: Any, device: torch.device, fast: bool) -> ModelTrainer:
    torch.manual_seed(0)
    model = DynamicsModel(OBS, ACT, cfg).to(device)
    return ModelTrainer(model, cfg, compile=fast, graphs=fast)


def _gens(device: torch.device, seeds: int) -> list[torch.Generator]:
    return [torch.Generator(device=device).manual_seed(s) for s in range(seeds)]


def _solo_fits(trainers: list[ModelTrainer], data: list[dict[str, torch.Tensor]]) -> None:
    for t, d, g in zip(trainers, data, _gens(trainers[0].model.device, len(data)), strict=True):
        t.fit(d["obs"], d["act"], d["next_obs"], d["rew"], g)


def _each(blocks: list[SACUpdates], updates: int) -> None:
    for block in blocks:
        block(updates)


def _blocks(
    device: torch.device, seeds: int, batch_size: int, fast: bool
) -> tuple[list[SACUpdates], SeedUpdates]:
    """S solo blocks and the batched block of S other agents of the same seeds."""
    cfg = SACConfig(batch_size=batch_size)
    agents = []
    for s in range(seeds):
        torch.manual_seed(s)
        agents.append(SAC(OBS, ACT, cfg, device, compile=fast))
    twins = [SAC(OBS, ACT, cfg, device, compile=fast) for _ in range(seeds)]
    for twin, agent in zip(twins, agents, strict=True):
        twin.load_state_dict(agent.state_dict())
    rows = [RealRows(device) for _ in range(seeds)]
    gens = _gens(device, seeds)
    with tf32_matmuls(fast):
        for agent in twins:
            agent.warm_up()
        batch = SeedBatch(agents, compile=fast)
        batch.warm_up()
    solo = [
        SACUpdates(a, r, batch_size, g, fast, fast)
        for a, r, g in zip(twins, rows, gens, strict=True)
    ]
    return solo, SeedUpdates(batch, rows, batch_size, gens, fast, fast)
