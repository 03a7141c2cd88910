"""Scale-out benchmarks behind ``scripts/bench.py``: the same work done one piece at a time and
spread over several env copies (or processes), timed side by side.

Each ``bench_*`` function returns the rows of one part of the scaling table: a list of dicts
with at least ``name``, ``median_s`` (median seconds of one run of the work) and
``speedup`` (the first row's, the one-at-a-time baseline's, median over this row's).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from mbrl.agents import SAC, SACConfig
from mbrl.bench.micro import Bench
from mbrl.envs import env_dims, make_env
from mbrl.evaluator import DeterministicPolicy, Evaluator, sequential_episodes

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


def fresh_actor(env: str, seed: int = 0) -> DeterministicPolicy:
    """The greedy policy of a freshly initialised SAC actor (default network sizes), on CPU."""
    probe = make_env(env)
    obs_dim, act_dim = env_dims(probe)
    probe.close()
    torch.manual_seed(seed)
    sac = SAC(obs_dim, act_dim, SACConfig(), CPU)
    return lambda obs: sac.act(obs, deterministic=True, generator=None)


def bench_eval(
    episodes: int = 10, env: str = "hopper", repeats: int = 3, max_episode_steps: int = 1000
) -> list[dict[str, Any]]:
    """One evaluation of ``episodes`` episodes with a fixed actor: sequential (episode after
    episode, batch-1 actor calls), then one vector env of ``episodes`` copies, sync and async.

    Env construction is not timed: the trainer builds its evaluator once. A fresh actor makes
    Hopper fall early, so episodes are shorter than ``max_episode_steps``; every row reports
    its mean episode length so the seconds can be read per step, and the longest: a vector
    env steps all its copies until the longest episode ends.
    """
    policy = fresh_actor(env)
    single = make_env(env, max_episode_steps)
    vectors = {
        mode: Evaluator(env, episodes, 0, CPU, max_episode_steps, vector=mode)
        for mode in ("sync", "async")
    }
    lengths: dict[str, np.ndarray] = {}  # each row's last per-episode lengths

    def sequential() -> None:
        lengths["sequential"] = sequential_episodes(single, episodes, 0, policy, CPU)[1]

    def vector(mode: str) -> Callable[[], None]:
        def run() -> None:
            vectors[mode].run(policy)
            lengths[f"vector {mode}"] = vectors[mode].last_lengths

        return run

    fns = {"sequential": sequential, **{f"vector {m}": vector(m) for m in vectors}}
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
