"""How much disk a run's checkpoints take, known before it starts.

``ckpt/last.pt`` (resume) and ``ckpt/ckpt_best.pt`` hold the whole state, the buffers
included; each ``ckpt/iteration_<N>.pt`` snapshot (one per evaluation) holds what evaluation
and analysis need (networks, optimizers, normalisers, counters) unless
``checkpoint.buffer_in_snapshots``. The sizes follow from the config: parameter counts of the
networks and the buffers' rows at the end of the run. A run whose checkpoints would not fit
on the disk is refused before it starts.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from torch import nn

from mbrl.agents import SAC
from mbrl.config import Config, ConfigError
from mbrl.models import DynamicsModel
from mbrl.rewarder import Rewarder
from mbrl.runtime.memory import buffer_bytes
from mbrl.runtime.progress import megabytes

STATE_OVERHEAD = 1 << 20  # counters, RNG and env states, pickling: about a megabyte


@dataclass(frozen=True)
class CheckpointSizes:
    full: int  # last.pt and ckpt_best.pt at the end of the run (bytes)
    snapshot: int  # one iteration_<N>.pt
    snapshots: int  # how many the run writes

    @property
    def total(self) -> int:
        return 2 * self.full + self.snapshots * self.snapshot

    def text(self) -> str:
        """One line for the start block."""
        if not self.snapshots:
            return f"~{megabytes(self.total)} by the end (last.pt, ckpt_best.pt)"
        return (
            f"~{megabytes(self.total)} by the end: last.pt and ckpt_best.pt "
            f"~{megabytes(self.full)} each, {self.snapshots} snapshots of "
            f"~{megabytes(self.snapshot)}"
        )


def _params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def checkpoint_sizes(cfg: Config, obs_dim: int, act_dim: int, world: int = 1) -> CheckpointSizes:
    """The checkpoint files of a run with ``cfg`` (sizes at its end, upper bounds; ``world``
    processes each add their own buffers)."""
    agent = SAC(obs_dim, act_dim, cfg.agent)
    # fp32 weights, Adam's two moments; the critic also has its target copy
    floats = 3 * _params(agent.actor) + 4 * _params(agent.critic)
    if cfg.algorithm.name == "mbpo":
        floats += 3 * _params(DynamicsModel(obs_dim, act_dim, cfg.model))
        if cfg.rewarder.mode != "none":
            floats += 3 * _params(Rewarder(obs_dim, act_dim, cfg.rewarder, agent.device).flows)
    slim = 4 * floats + STATE_OVERHEAD
    full = slim + world * sum(buffer_bytes(cfg, obs_dim, act_dim))
    count = cfg.total_steps // cfg.eval.every + 1 if cfg.checkpoint.snapshots else 0
    return CheckpointSizes(full, full if cfg.checkpoint.buffer_in_snapshots else slim, count)


def check_disk(
    cfg: Config, obs_dim: int, act_dim: int, run_dir: str, world: int = 1
) -> CheckpointSizes:
    """Raise :class:`ConfigError` if the run's checkpoints would not fit on the disk that
    holds ``run_dir`` (or its nearest existing parent)."""
    sizes = checkpoint_sizes(cfg, obs_dim, act_dim, world)
    where = os.path.abspath(run_dir)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    free = shutil.disk_usage(where).free
    if sizes.total <= free:
        return sizes
    hint = "checkpoint.snapshots=false" if sizes.snapshots else "a disk with more room"
    raise ConfigError(
        f"the run's checkpoints would take {sizes.text()}, but {where} has "
        f"{megabytes(free)} free: free some space, or use {hint}"
    )
