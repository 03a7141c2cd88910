"""How much disk a run's checkpoints take, known before it starts: the networks' parameters
and the rows the buffers hold at the run's end, counted as docs/failures.md ("What a checkpoint
file holds") says. A run whose checkpoints would not fit on the disk is refused before it starts.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from torch import nn

from mbrl.agents import build_agent
from mbrl.config import Config, ConfigError
from mbrl.models import DynamicsModel
from mbrl.rewarder import Rewarder
from mbrl.runtime.eta import evaluations
from mbrl.runtime.memory import buffer_bytes, row_bytes
from mbrl.runtime.progress import megabytes
from mbrl.schedule import model_phase_steps, model_pool_size, pool_capacity, rollout_length

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


def pool_rows(cfg: Config) -> int:
    """Rows the model pool holds at the run's end: at each model phase its window narrows to
    the size for that phase's rollout length, then the rollouts add their rows (as
    ``ReplayBuffer.set_window`` and ``add`` do)."""
    if cfg.algorithm.name != "mbpo":
        return 0
    rows, capacity = 0, pool_capacity(cfg)
    for step in model_phase_steps(cfg):
        length = rollout_length(step, cfg)
        window = min(model_pool_size(cfg, length), capacity)
        rows = min(window, min(rows, window) + cfg.rollout.batch_size * length)
    return rows


def checkpoint_sizes(cfg: Config, obs_dim: int, act_dim: int) -> CheckpointSizes:
    """The checkpoint files of a run with ``cfg``, at its end (the ranks of a torchrun run
    share its transitions: their buffers hold as many rows together as one process's)."""
    agent = build_agent(obs_dim, act_dim, cfg.agent)
    # fp32 weights and Adam's two moments; the critic's target copy (an agent may have none)
    target = 0 if agent.critic_target is None else _params(agent.critic_target)
    floats = 3 * _params(agent.actor) + 3 * _params(agent.critic) + target
    if cfg.algorithm.name == "mbpo":
        floats += 3 * _params(DynamicsModel(obs_dim, act_dim, cfg.model))
        if cfg.rewarder.mode != "none":
            floats += 3 * _params(Rewarder(obs_dim, act_dim, cfg.rewarder, agent.device).flows)
    slim = 4 * floats + STATE_OVERHEAD
    # (the real buffer's rows as allocated, less the spare row of its ring: not stored)
    real = buffer_bytes(cfg, obs_dim, act_dim)[0] - row_bytes(obs_dim, act_dim, False)
    pool = pool_rows(cfg) * row_bytes(obs_dim, act_dim, True) if cfg.checkpoint.pool else 0
    full = slim + real + pool
    count = evaluations(cfg) if cfg.checkpoint.snapshots else 0
    return CheckpointSizes(full, full if cfg.checkpoint.buffer_in_snapshots else slim, count)


def check_disk(cfg: Config, obs_dim: int, act_dim: int, run_dir: str) -> CheckpointSizes:
    """Raise :class:`ConfigError` if the run's checkpoints would not fit on the disk that
    holds ``run_dir`` (or its nearest existing parent)."""
    sizes = checkpoint_sizes(cfg, obs_dim, act_dim)
    where = os.path.abspath(run_dir)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    free = shutil.disk_usage(where).free
    seeds = cfg.batch_seeds  # (batched seeds: each writes its own checkpoints)
    if seeds * sizes.total <= free:
        return sizes
    hint = "checkpoint.snapshots=false" if sizes.snapshots else "a disk with more room"
    each = f" for each of batch_seeds={seeds} seeds" if seeds > 1 else ""
    raise ConfigError(
        f"the run's checkpoints would take {sizes.text()}{each}, but {where} has "
        f"{megabytes(free)} free: free some space, or use {hint}"
    )
