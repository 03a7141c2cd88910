"""Scale-out benchmarks of the real loop: SAC env steps/s with ``env.num_envs`` copies (sync
and async), and one run on 1 vs 2 processes (torch.distributed, gloo on the CPU).

Rows are dicts with ``name``, the measured rate and ``speedup`` over the first row.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from functools import partial
from typing import Any

import torch
import torch.multiprocessing as mp

from mbrl.agents import SAC, ActingPolicy, SACConfig
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.config import Config
from mbrl.envs.vector import make_vector_env, vector_dims
from mbrl.runtime.validate import validate

CPU = torch.device("cpu")


def _sampling_rate(num_envs: int, mode: str, env_steps: int, updates_per_step: int) -> float:
    """Env steps/s of SAC's side of the loop: the actor acts on the N observations, the N
    copies step, N rows reach the buffer, then N x ``updates_per_step`` SAC updates."""
    envs = make_vector_env("hopper", num_envs, mode)
    obs_dim, act_dim = vector_dims(envs)
    buf = ReplayBuffer(env_steps + 2000, transition_fields(obs_dim, act_dim), CPU)
    sac = SAC(obs_dim, act_dim, SACConfig(), CPU)
    acting = ActingPolicy(sac, CPU, sync_every=10)
    collector = Collector(envs, buf, CPU, seed=0)
    gen, act_gen = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
    policy = partial(acting.act, deterministic=False, generator=act_gen)
    for _ in range(-(-1000 // num_envs)):  # rows to sample from, and a warm start
        collector.step(policy)
    start = time.perf_counter()
    for _ in range(env_steps // num_envs):
        collector.step(policy)
        for _ in range(num_envs * updates_per_step):
            sac.update(buf.sample(256, gen), gen)
    rate = (env_steps // num_envs) * num_envs / (time.perf_counter() - start)
    collector.close()
    return rate


def bench_sampling(
    counts: tuple[int, ...] = (1, 2, 4, 8),
    modes: tuple[str, ...] = ("sync", "async"),
    env_steps: int = 2000,
    updates_per_step: int = 1,
) -> list[dict[str, Any]]:
    """Hopper env steps/s per (num_envs, mode): collection alone (no updates) and SAC's loop
    (``updates_per_step`` updates per env step: SAC's 1; MBPO's 20 would hide the env)."""
    rows: list[dict[str, Any]] = []
    torch.set_num_threads(1)
    for n in counts:
        for mode in modes if n > 1 else ("sync",):
            rows.append(
                {
                    "name": f"num_envs={n} {mode}",
                    "num_envs": n,
                    "mode": mode,
                    "collect_steps_per_s": _sampling_rate(n, mode, env_steps, 0),
                    "sac_steps_per_s": _sampling_rate(n, mode, env_steps // 4, updates_per_step),
                }
            )
    for r in rows:
        r["collect_speedup"] = r["collect_steps_per_s"] / rows[0]["collect_steps_per_s"]
        r["sac_speedup"] = r["sac_steps_per_s"] / rows[0]["sac_steps_per_s"]
    return rows


def ddp_config(total_steps: int, updates_per_step: int) -> Config:
    """Hopper SAC at MBPO's update rate: the loop DDP spreads (batch 256 split over ranks)."""
    return validate(
        {
            "env": {"name": "hopper"},
            "algorithm": {"name": "sac", "init_steps": 256, "updates_per_step": updates_per_step},
            "total_steps": total_steps,
            "device": "cpu",
            "eval": {"every": total_steps, "episodes": 1},
            "logger": {"every": total_steps, "progress": False, "tensorboard": False},
            "checkpoint": {"snapshots": False},
        }
    )


def _rank(rank: int, world: int, port: int, cfg: Config, run_dir: str, out: str) -> None:
    from mbrl.trainer import Trainer  # (in the spawned process)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank))
    os.environ.update(LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    trainer = Trainer(cfg, run_dir)
    trainer.run()
    if rank == 0:
        torch.save(dict(trainer.timer.grand), out)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def bench_ddp(
    worlds: tuple[int, ...] = (1, 2), total_steps: int = 768, updates_per_step: int = 20
) -> list[dict[str, Any]]:
    """Seconds per 1000 env steps of the SAC updates and env steps (after the random ones)
    when one run spans ``world`` processes, each a share of the env steps and of every batch."""
    rows: list[dict[str, Any]] = []
    cfg = ddp_config(total_steps, updates_per_step)
    for world in worlds:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "seconds.pt")
            args = (world, _free_port(), cfg, os.path.join(tmp, "run"), out)
            mp.start_processes(_rank, args, nprocs=world, start_method="spawn")
            seconds = torch.load(out)
        loop = seconds["sac"] + seconds["env"]
        per_1000 = 1000 * loop / (total_steps - cfg.algorithm.init_steps)
        rows.append({"name": f"{world} process{'es' if world > 1 else ''}", "world": world,
                     "s_per_1000_steps": per_1000, "sac_s": seconds["sac"]})  # fmt: skip
    for r in rows:
        r["speedup"] = rows[0]["s_per_1000_steps"] / r["s_per_1000_steps"]
    return rows


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
