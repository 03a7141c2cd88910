"""The batched-seeds rows of ``scripts/bench.py --seed-batch S,...``: per S, the G-update
blocks of S solo agents run one after another (what S runs in one process would do, and
about what S processes time-sliced on one GPU do) against one batched block for the S seeds
(``mbrl.agents.seed_batch``), side by side in the same rounds. The figure is SAC updates per
second per seed and all seeds together; ``ran`` says what each ran (eager, compiled,
graphed)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.agents.seed_batch import SeedBatch, SeedUpdates
from mbrl.bench.micro import ACT, OBS, Bench
from mbrl.bench.update_bench import RealRows
from mbrl.compiled import tf32_matmuls

WARM_BLOCKS = 5  # (a CUDA graph is captured at the fourth block)


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
        row: dict[str, Any] = {"seeds": seeds, "ran_solo": solo[0].ran, "ran": batched.ran}
        for name, times in t.items():
            per_seed = updates / statistics.median(times)
            row[f"{name}_updates_per_s_per_seed"] = per_seed
            row[f"{name}_updates_per_s_all"] = per_seed * seeds
        row["time_vs_solo"] = statistics.median(
            x / y for x, y in zip(t["batched"], t["solo"], strict=True)
        )
        out[f"S={seeds}"] = row
    return out


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
    gens = [torch.Generator(device=device).manual_seed(s) for s in range(seeds)]
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
