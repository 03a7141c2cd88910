"""Micro-benchmarks behind ``scripts/bench.py`` (the whole loop: ``loop_bench.py``).

Every figure is a median over ``repeats`` timed runs after a warm-up, on the given device
(with a device sync around each timed run on CUDA).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from mbrl.agents import SAC, ActingPolicy, SACConfig, resolve_act_device
from mbrl.buffer import ReplayBuffer, random_transitions, transition_fields
from mbrl.collector import Collector
from mbrl.envs import env_spec, make_env
from mbrl.envs.vector import make_vector_env
from mbrl.models import DynamicsModel, model_config
from mbrl.rollout import rollout
from mbrl.staging import HostStager

OBS, ACT = 11, 3  # Hopper


@dataclass
class Bench:
    device: torch.device
    repeats: int = 5
    warmup: int = 2

    def median(self, fn: Callable[[], Any]) -> float:
        """Median seconds of ``fn()`` over the repeats, after the warm-up calls."""
        return statistics.median(self.side_by_side({"": fn})[""])

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def side_by_side(
        self, fns: dict[str, Callable[[], Any]], rounds: int | None = None
    ) -> dict[str, list[float]]:
        """Seconds per call of each fn, the fns taking turns within every round (``repeats``
        rounds unless given), so that a slow spell of a shared machine hits all of them
        alike."""
        for fn in fns.values():
            for _ in range(self.warmup):
                fn()
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(self.repeats if rounds is None else rounds):
            for name, fn in fns.items():
                self._sync()
                t0 = time.perf_counter()
                fn()
                self._sync()
                times[name].append(time.perf_counter() - t0)
        return times


def gemm_block(n: int, device: torch.device) -> tuple[Callable[[], None], float]:
    """A block of n x n x n matmuls (about 2 GFLOP) and its FLOP count."""
    x = torch.randn(n, n, device=device)
    y = torch.randn(n, n, device=device)
    reps = max(1, int(2e9 / (2 * n**3)))

    def run() -> None:
        for _ in range(reps):
            torch.mm(x, y)

    return run, 2.0 * n**3 * reps


def gemm_flops(b: Bench, n: int) -> float:
    """Measured matmul throughput (FLOP/s) for an n x n x n product."""
    run, flops = gemm_block(n, b.device)
    return flops / b.median(run)


def hopper_rows(
    n: int, device: torch.device | str, obs: int = OBS, act: int = ACT
) -> dict[str, torch.Tensor]:
    """``n`` random transitions (Hopper's sizes by default; the same ones in every process:
    drawn on the CPU)."""
    rows = random_transitions(n, obs, act, torch.Generator().manual_seed(5), terminal=0.05)
    return {k: v.to(device) for k, v in rows.items()}


def model_rollout(b: Bench, name: str, batch: int = 100_000) -> float:
    """Rollout transitions/s: one step of ``batch`` rows (actor + random elite + termination)."""
    model = DynamicsModel(OBS, ACT, model_config(name)).to(b.device)
    agent = SAC(OBS, ACT, SACConfig(), b.device)
    fields = {**transition_fields(OBS, ACT), "score": ((), torch.float32)}
    pool = ReplayBuffer(batch, fields, b.device)
    start = torch.randn(batch, OBS, device=b.device)
    term = env_spec("hopper").termination_fn
    gen = torch.Generator(device=b.device).manual_seed(0)
    return batch / b.median(lambda: rollout(model, agent, term, start, 1, pool, gen))


def buffer_rates(b: Bench) -> dict[str, float]:
    """Rows/s for single-row adds (the env loop), 1000-row adds, and 256-row samples."""
    buf = ReplayBuffer(100_000, transition_fields(OBS, ACT), b.device)
    one, many = hopper_rows(1, b.device), hopper_rows(1000, b.device)
    gen = torch.Generator(device=b.device).manual_seed(0)
    buf.add(many)

    def add_one() -> None:
        for _ in range(1000):
            buf.add(one)

    def sample() -> None:
        for _ in range(100):
            buf.sample(256, gen)

    return {
        "add_1_rows_per_s": 1000 / b.median(add_one),
        "add_1000_rows_per_s": 1000 / b.median(lambda: buf.add(many)),
        "sample_256_rows_per_s": 100 * 256 / b.median(sample),
    }


def env_steps(b: Bench, steps: int = 2000) -> float:
    """Raw Hopper-v5 env steps/s with random actions (no agent, no buffer)."""
    env = make_env("hopper")
    env.reset(seed=0)
    act = env.action_space.sample()

    def run() -> None:
        for _ in range(steps):
            _, _, term, trunc, _ = env.step(act)
            if term or trunc:
                env.reset()

    return steps / b.median(run)


def acting_loop(b: Bench, act_device: str, steps: int = 100, updates: int = 20) -> float:
    """Env steps/s of the SAC half of the MBPO loop: act, step Hopper, stage the transition,
    then ``updates`` SAC updates (MBPO's 20 per step), with actions computed on
    ``act_device`` (``train`` or ``cpu``)."""
    env = make_vector_env("hopper", 1)
    buf = ReplayBuffer(10_000, transition_fields(OBS, ACT), b.device)
    sac = SAC(OBS, ACT, SACConfig(), b.device)
    acting = ActingPolicy(sac, resolve_act_device(act_device, b.device), sync_every=10)
    collector = Collector(env, buf, acting.device, seed=0)
    gen = torch.Generator(device=b.device).manual_seed(0)
    act_gen = torch.Generator(device=acting.device).manual_seed(0)
    buf.add(hopper_rows(1000, b.device))
    policy = partial(acting.act, deterministic=False, generator=act_gen)

    def run() -> None:
        for _ in range(steps):
            collector.step(policy)
            acting.step()
            for _ in range(updates):
                sac.update(buf.sample(256, gen), gen)

    return steps / b.median(run)


def staging(b: Bench, pinned: bool, rows: int = 1000) -> float:
    """Rows/s of env transitions staged on the host and added to a device buffer."""
    buf = ReplayBuffer(10_000, transition_fields(OBS, ACT), b.device)
    shapes = {k: tuple(v.shape[1:]) for k, v in buf.data.items()}
    stager = HostStager(shapes, b.device, pinned=pinned)
    obs = np.random.default_rng(0).standard_normal(OBS)
    row: dict[str, np.ndarray | float | bool] = {"obs": obs, "act": obs[:ACT], "rew": 1.0}
    row |= {"next_obs": obs, "terminated": False, "truncated": False}

    def run() -> None:
        for _ in range(rows):
            buf.add(stager.stage(row))

    return rows / b.median(run)
