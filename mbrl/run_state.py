"""A run's checkpoint: the algorithm's state, as :meth:`mbrl.mbpo.MBPO.state_dict` declares
it, and the run's own around it (the evaluations so far, the logger's position, the rates of
the estimate of the time left).

The shared part of the algorithm's state (networks, optimizers, the model side, counters) is
the same on every rank of a run on several processes; each rank's own part (``mbrl.mbpo.OWN``:
its buffers, env copies, generators, the acting copy) is gathered to rank 0, which writes one
file. Rank 0's own part sits at the top level, the others' under ``ranks``, so a one-process
checkpoint has the same layout as ever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl import collectives
from mbrl.compiled import Speed
from mbrl.config import Config
from mbrl.mbpo import MBPO, OWN
from mbrl.runtime import checkpoint
from mbrl.runtime.eta import RunClock
from mbrl.runtime.logger import Logger, SilentLogger
from mbrl.runtime.timer import PhaseTimer


class Run(Protocol):
    """What a checkpoint holds of a run (``mbrl.trainer.Trainer``) besides its algorithm."""

    config: Config
    world: int
    rank: int
    algo: MBPO
    best_return: float
    best_step: int
    last_eval: dict[str, float]
    clock: RunClock  # the estimate of the time left: its rates go with the run
    timer: PhaseTimer
    logger: Logger | SilentLogger  # its position in the metrics: a resume appends there
    speed: Speed  # compile=auto's choice goes with the run (a resume makes the same)
    device: torch.device


def state_dict(t: Run) -> dict[str, Any] | None:
    """The whole run's state on rank 0 (every rank must call it); None on the others."""
    algo = t.algo.state_dict(pool=t.config.checkpoint.pool)
    own = {key: algo.pop(key) for key in OWN}
    parts = collectives.gather_objects(own if t.rank == 0 else _to_cpu(own))
    if parts is None:
        return None
    return {
        "format": checkpoint.FORMAT_VERSION,
        "env": t.config.env.name,
        "config": asdict(t.config),
        "world_size": t.world,
        "compiled": {"device": t.device.type, "on": t.speed.compile},
        **algo,  # step, updates, agent, algorithm (the model side)
        "best_return": t.best_return,
        "best_step": t.best_step,
        "last_eval": dict(t.last_eval),
        "logger": t.logger.state_dict(),
        "clock": t.clock.state_dict(t.timer.grand, t.algo.paused_row_epochs),
        "timer": t.timer.state_dict(),  # (the seconds since the last log line)
        **parts[0],
        "ranks": parts[1:],
    }


def load(t: Run, run_dir: str) -> dict[str, Any]:
    """Restore ``t`` from ``run_dir/ckpt/last.pt`` (this rank's own part); returns the state."""
    state = checkpoint.load(os.path.join(run_dir, "ckpt", "last.pt"), env_name=t.config.env.name)
    checkpoint.check_layout(state, run_dir, t.world, t.algo.collector.num_envs)
    own = state if t.rank == 0 else state["ranks"][t.rank - 1]
    try:
        t.algo.load_state_dict(state, own)
    except ValueError as err:  # another algorithm's state, another env's episodes
        raise checkpoint.CheckpointError(f"{run_dir}: {err}") from None
    t.best_return, t.best_step = state["best_return"], state.get("best_step", 0)
    t.last_eval = state["last_eval"]
    clock = state.get("clock")  # (None: written before it was)
    t.clock.load_state_dict(clock, t.algo.fits, t.algo.paused_row_epochs)
    t.timer.load_state_dict(state.get("timer"))  # (None: written before it was)
    return state


def shared_tensors(algo: MBPO) -> list[Tensor]:
    """Every floating-point tensor the ranks share (networks, the model, the rewarder)."""
    return [x for x in _tensors(algo.shared_state()) if x.is_floating_point()]


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
