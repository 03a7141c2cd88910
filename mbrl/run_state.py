"""A run's checkpoint: what :class:`mbrl.trainer.Trainer` saves and restores.

The shared part (networks, optimizers, the model side, counters) is the same on every rank of
a run on several processes; each rank's own part (its buffers, env copies, generators, the
acting copy) is gathered to rank 0, which writes one file. Rank 0's own part sits at the top
level, the others' under ``ranks``, so a one-process checkpoint has the same layout as ever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl.agents import SAC, ActingPolicy
from mbrl.buffer import ReplayBuffer
from mbrl.collector import Collector
from mbrl.config import Config
from mbrl.mbpo import ModelFree, ModelSide
from mbrl.runtime import checkpoint, distributed
from mbrl.runtime.eta import RunClock
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import rng_state, set_rng_state

OWN = ("acting", "buffers", "collector", "rng")  # each rank's own part of a checkpoint


class Parts(Protocol):
    config: Config
    world: int
    rank: int
    agent: SAC
    acting: ActingPolicy
    buffer: ReplayBuffer
    model_side: ModelSide | ModelFree
    collector: Collector
    gens: dict[str, torch.Generator]
    updates: int
    best_return: float
    best_step: int
    last_eval: dict[str, float]
    clock: RunClock  # the estimate of the time left: its rates go with the run
    timer: PhaseTimer


def buffers(t: Parts) -> dict[str, ReplayBuffer]:
    """The real buffer, and the model pool in an MBPO run."""
    return {"real": t.buffer, **t.model_side.buffers()}


def state_dict(t: Parts, logger_state: dict[str, Any]) -> dict[str, Any] | None:
    """The whole run's state on rank 0 (every rank must call it); None on the others."""
    own = {
        "acting": t.acting.state_dict(),
        "buffers": {name: b.state_dict() for name, b in buffers(t).items()},
        "collector": t.collector.state_dict(),
        "rng": rng_state(t.gens),
    }
    parts = distributed.gather_objects(own if t.rank == 0 else _to_cpu(own))
    if parts is None:
        return None
    return {
        "format": checkpoint.FORMAT_VERSION,
        "env": t.config.env.name,
        "config": asdict(t.config),
        "world_size": t.world,
        "step": t.collector.envstep_count,
        "updates": t.updates,
        "best_return": t.best_return,
        "best_step": t.best_step,
        "last_eval": dict(t.last_eval),
        "agent": t.agent.state_dict(),
        "algorithm": t.model_side.state_dict(),
        "logger": logger_state,
        "clock": t.clock.state_dict(t.timer.grand),
        **parts[0],
        "ranks": parts[1:],
    }


def load(t: Parts, run_dir: str) -> dict[str, Any]:
    """Restore ``t`` from ``run_dir/ckpt/last.pt`` (this rank's own part); returns the state."""
    state = checkpoint.load(os.path.join(run_dir, "ckpt", "last.pt"), env_name=t.config.env.name)
    checkpoint.check_layout(state, run_dir, t.world, t.collector.num_envs)
    own = state if t.rank == 0 else state["ranks"][t.rank - 1]
    t.agent.load_state_dict(state["agent"])
    t.acting.load_state_dict(own["acting"])
    for name, buffer in buffers(t).items():
        buffer.load_state_dict(own["buffers"][name])
    try:
        t.model_side.load_state_dict(state["algorithm"])
        t.collector.load_state_dict(own["collector"])
    except ValueError as err:
        raise checkpoint.CheckpointError(f"{run_dir}: {err}") from None
    set_rng_state(own["rng"], t.gens)
    t.updates, t.best_return = state["updates"], state["best_return"]
    t.best_step = state.get("best_step", 0)
    t.last_eval = state["last_eval"]
    fits = t.model_side.model_trainer.fits if isinstance(t.model_side, ModelSide) else 0
    t.clock.load_state_dict(state.get("clock"), fits)  # (None: written before it was saved)
    return state


def shared_tensors(t: Parts) -> list[Tensor]:
    """Every floating-point tensor the ranks share (networks, the model, the rewarder)."""
    state = {"agent": t.agent.state_dict(), "algorithm": t.model_side.state_dict()}
    return [x for x in _tensors(state) if x.is_floating_point()]


def _tensors(obj: Any) -> Iterator[Tensor]:
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            yield from _tensors(value)


def _to_cpu(obj: Any) -> Any:
    """Tensors to host memory before they are pickled to rank 0."""
    if isinstance(obj, Tensor):
        return obj.cpu()  # sync-ok: once per checkpoint
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj
