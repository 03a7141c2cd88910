"""Scale-out benchmarks behind ``scripts/bench.py``: the same work done one piece at a time and
spread over several env copies (or processes), timed side by side: evaluation episode after
episode vs as one vector env; SAC env steps/s with ``env.num_envs`` copies (sync and async);
one run on 1 vs 2 processes (torch.distributed, gloo on the CPU).

Each ``bench_*`` function returns the rows of one part of the scaling table: a list of dicts
with at least ``name``, the measured figures and the speedup over the first row's (the
one-at-a-time baseline's).
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp

from mbrl.agents import SAC, ActingPolicy, SACConfig
from mbrl.bench.micro import ACT, OBS, Bench
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.config import Config
from mbrl.envs import make_env
from mbrl.envs.vector import make_vector_env
from mbrl.evaluator import DeterministicPolicy, Evaluator, sequential_episodes
from mbrl.runtime.validate import validate

CPU = torch.device("cpu")


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """One intra-op thread while timing (as in training), the caller's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bench_eval(
    episodes: int = 10, repeats: int = 3, max_episode_steps: int = 1000
) -> list[dict[str, Any]]:
    """One Hopper evaluation of ``episodes`` episodes with a fixed actor (a freshly initialised
    SAC actor, greedy, on the CPU): sequential (episode after episode, batch-1 actor calls),
    then one vector env of ``episodes`` copies, sync and async.

    Env construction is not timed: the trainer builds its evaluator once. A fresh actor makes
    Hopper fall early, so episodes are shorter than ``max_episode_steps``; every row reports
    its mean episode length so the seconds can be read per step, and the longest: a vector
    env steps all its copies until the longest episode ends.
    """
    torch.manual_seed(0)
    sac = SAC(OBS, ACT, SACConfig(), CPU)
    policy: DeterministicPolicy = partial(sac.act, deterministic=True, generator=None)
    single = make_env("hopper", max_episode_steps)
    vectors = {
        mode: Evaluator("hopper", episodes, 0, CPU, max_episode_steps, vector=mode)
        for mode in ("sync", "async")
    }
    lengths: dict[str, np.ndarray] = {}  # each row's last per-episode lengths

    def sequential() -> None:
        lengths["sequential"] = sequential_episodes(single, episodes, 0, policy, CPU)[1]

    def vector(mode: str) -> None:
        vectors[mode].run(policy)
        lengths[f"vector {mode}"] = vectors[mode].last_lengths

    fns: dict[str, Callable[[], None]] = {"sequential": sequential}
    fns |= {f"vector {m}": partial(vector, m) for m in vectors}
    try:
        with _torch_threads(1):
            times = Bench(CPU, repeats=repeats, warmup=1).side_by_side(fns)
    finally:
        single.close()
        for evaluator in vectors.values():
            evaluator.close()
    return _rows(times, lengths, episodes)


def _rows(
    times: dict[str, list[float]], lengths: dict[str, np.ndarray], episodes: int
) -> list[dict[str, Any]]:
    medians = {name: float(np.median(t)) for name, t in times.items()}
    base = next(iter(medians.values()))
    return [
        {
            "name": name,
            "episodes": episodes,
            "median_s": s,
            "speedup": base / s,
            "episode_length_mean": float(lengths[name].mean()),
            "episode_length_max": int(lengths[name].max()),
        }
        for name, s in medians.items()
    ]


def _sampling_rate(num_envs: int, mode: str, env_steps: int, updates_per_step: int) -> float:
    """Env steps/s of SAC's side of the loop: the actor acts on the N observations, the N
    copies step, N rows reach the buffer, then N x ``updates_per_step`` SAC updates."""
    envs = make_vector_env("hopper", num_envs, mode)
    buf = ReplayBuffer(env_steps + 2000, transition_fields(OBS, ACT), CPU)
    sac = SAC(OBS, ACT, SACConfig(), CPU)
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
    # Hopper SAC at MBPO's update rate: the loop DDP spreads (batch 256 split over ranks).
    cfg = validate(
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
    rows: list[dict[str, Any]] = []
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
