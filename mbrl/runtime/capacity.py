"""Will the run fit? Checked before anything is allocated or written: its buffers in memory
(allocated once, at full size: a value that cannot fit is refused naming the largest that does;
docs/usage.md) and its checkpoints on disk (docs/failures.md, "What a checkpoint file holds")."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence

import torch
from torch import nn

from mbrl.agents import build_agent
from mbrl.config import Config, ConfigError
from mbrl.models import DynamicsModel
from mbrl.rewarder import Rewarder
from mbrl.runtime.eta import evaluations
from mbrl.runtime.progress import megabytes
from mbrl.schedule import (
    model_phase_steps,
    model_pool_size,
    pool_capacity,
    rollout_length,
    run_length,
    sac_updates,
)

HEADROOM = 0.9  # of the free memory the buffers may take; the rest is networks and workspace


def row_bytes(obs_dim: int, act_dim: int, model_pool: bool) -> int:
    """obs, next_obs, act, rew as fp32, terminated and truncated as bools, an int64 push
    index, and (model pool) the rewarder score."""
    return 4 * (2 * obs_dim + act_dim + 1) + 2 + 8 + (4 if model_pool else 0)


def buffer_bytes(cfg: Config, obs_dim: int, act_dim: int) -> tuple[int, int]:
    """(real buffer bytes, model pool bytes) as the trainer allocates them."""
    real = (min(cfg.buffer.capacity, run_length(cfg)) + 1) * row_bytes(obs_dim, act_dim, False)
    pool = 0
    if cfg.algorithm.name == "mbpo":
        pool = (pool_capacity(cfg) + 1) * row_bytes(obs_dim, act_dim, True)
    return real, pool


def free_bytes(device: torch.device) -> int:
    """Free memory where the buffers go: the GPU's, or the host's available RAM."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(cfg: Config, obs_dim: int, act_dim: int, device: torch.device) -> None:
    """Raise :class:`ConfigError` if the buffers would not fit in ``HEADROOM`` of free memory."""
    real, pool = buffer_bytes(cfg, obs_dim, act_dim)
    seeds = cfg.batch_seeds  # (batched seeds: each its own buffers, in this process)
    budget = HEADROOM * free_bytes(device)
    if seeds * (real + pool) <= budget:
        return
    where = "GPU memory" if device.type == "cuda" else "RAM"
    need = f"{_gb(real + pool)} (real buffer {_gb(real)}, model pool {_gb(pool)})"
    if seeds > 1:
        need = f"{_gb(seeds * (real + pool))} for batch_seeds={seeds} seeds ({need} each)"
    budget /= seeds  # (what each seed's buffers may take)
    group, key = ("rollout", "batch_size") if pool > real else ("buffer", "capacity")
    largest = _largest(cfg, obs_dim, act_dim, budget, group, key)
    raise ConfigError(
        f"{group}.{key}={getattr(getattr(cfg, group), key)} is too large: the buffers need "
        f"{need}, but only {_gb(budget)} of the {_gb(budget / HEADROOM)} of free {where} can go "
        f"to them; the largest {group}.{key} that fits is {largest}"
    )


def _largest(cfg: Config, obs_dim: int, act_dim: int, budget: float, group: str, key: str) -> int:
    """The largest value of ``group.key`` whose buffers fit in ``budget`` (they grow with it:
    a bisection below the value that does not fit)."""

    def total(value: int) -> int:
        node = dataclasses.replace(getattr(cfg, group), **{key: value})
        return sum(buffer_bytes(dataclasses.replace(cfg, **{group: node}), obs_dim, act_dim))

    fits, over = 0, getattr(getattr(cfg, group), key)
    while over - fits > 1:
        mid = (fits + over) // 2
        fits, over = (mid, over) if total(mid) <= budget else (fits, mid)
    return fits


def _gb(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GB" if nbytes < 10 * 2**40 else f"{nbytes / 2**40:.3g} TB"


STATE_OVERHEAD = 1 << 20  # counters, RNG and env states, pickling: about a megabyte


@dataclasses.dataclass(frozen=True)
class CheckpointSizes:
    full: int  # last.pt and ckpt_best.pt at the end of the run (bytes)
    snapshot: int  # one iteration_<N>.pt
    snapshots: int  # how many the run writes
    early: tuple[int, int] = (0, 0)  # (how many, bytes each) of those before the first update

    @property
    def total(self) -> int:
        count, size = self.early
        return 2 * self.full + (self.snapshots - count) * self.snapshot + count * size

    def text(self) -> str:
        """One line for the start block. ckpt_best.pt is counted as a file of its own; while
        the last evaluation is the best it is the same file as last.pt (a hard link)."""
        total = f"at most ~{megabytes(self.total)} by the end"
        if not self.snapshots:
            return f"{total} (last.pt, ckpt_best.pt: one file while the last evaluation is best)"
        count, size = self.early
        n = self.snapshots
        if count == n:  # (no update in the whole run)
            each = f"~{megabytes(size)}, before any update"
        else:
            early = f" (the first {count}, before any update, ~{megabytes(size)})" if count else ""
            each = f"~{megabytes(self.snapshot)}{early}"
        return (
            f"{total}: last.pt and ckpt_best.pt ~{megabytes(self.full)} each (one file while "
            f"the last evaluation is best), {n} snapshot{'s' * (n != 1)} of {each}"
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
    sac = [agent.actor, agent.critic]  # (with Adam's two moments once they have stepped)
    fitted: list[nn.Module] = []  # (the same, once a model phase has fitted them)
    if cfg.algorithm.name == "mbpo":
        fitted.append(DynamicsModel(obs_dim, act_dim, cfg.model))
        if cfg.rewarder.mode != "none":
            fitted.append(Rewarder(obs_dim, act_dim, cfg.rewarder, agent.device).flows)
    # fp32 weights; the critic's target copy (an agent may have none); the moments of what
    # the run steps at all (a run of random steps alone steps nothing)
    trained = sum(_params(m) for m in sac + fitted)
    weights = trained + (0 if agent.critic_target is None else _params(agent.critic_target))
    moved = sum(_params(m) for m in sac) if sac_updates(cfg) else 0
    moved += sum(_params(m) for m in fitted) if model_phase_steps(cfg) else 0
    slim = 4 * (weights + 2 * moved) + STATE_OVERHEAD
    # (the real buffer's rows as allocated, less the spare row of its ring: not stored)
    real = buffer_bytes(cfg, obs_dim, act_dim)[0] - row_bytes(obs_dim, act_dim, False)
    pool = pool_rows(cfg) * row_bytes(obs_dim, act_dim, True) if cfg.checkpoint.pool else 0
    full = slim + real + pool
    count = evaluations(cfg) if cfg.checkpoint.snapshots else 0
    if cfg.checkpoint.buffer_in_snapshots:
        return CheckpointSizes(full, full, count)
    # the optimizers hold no state before their first step: snapshots up to the random steps'
    # end hold the weights alone
    init = cfg.algorithm.init_steps
    early = count - (evaluations(cfg, init + 1) if count and init < run_length(cfg) else 0)
    return CheckpointSizes(full, slim, count, (early, 4 * weights + STATE_OVERHEAD))


def check_disk(
    cfg: Config, obs_dim: int, act_dim: int, run_dir: str, folders: Sequence[str] = ()
) -> CheckpointSizes:
    """Raise :class:`ConfigError` if the run's checkpoints would not fit on the disk that
    holds ``run_dir`` (or its nearest existing parent). ``folders``: a batch's run folders
    (``batch_seeds``), whose checkpoints so far count as room; default ``run_dir`` alone."""
    sizes = checkpoint_sizes(cfg, obs_dim, act_dim)
    where = os.path.abspath(run_dir)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    free = shutil.disk_usage(where).free
    # A resumed run's checkpoints so far are part of its total, already on the disk.
    held = sum(_ckpt_bytes(folder) for folder in (folders or [run_dir]))
    seeds = cfg.batch_seeds  # (batched seeds: each writes its own checkpoints)
    if seeds * sizes.total <= free + held:
        return sizes
    hint = "checkpoint.snapshots=false" if sizes.snapshots else "a disk with more room"
    each = f" for each of batch_seeds={seeds} seeds" if seeds > 1 else ""
    there = f" (and its checkpoints so far {megabytes(held)})" if held else ""
    raise ConfigError(
        f"the run's checkpoints would take {sizes.text()}{each}, but {where} has "
        f"{megabytes(free)} free{there}: free some space, or use {hint}"
    )


def _ckpt_bytes(run_dir: str) -> int:
    """What the files in ``run_dir``'s ``ckpt/`` take (0 without one)."""
    ckpt = os.path.join(os.path.abspath(run_dir), "ckpt")
    if not os.path.isdir(ckpt):
        return 0
    return sum(e.stat().st_size for e in os.scandir(ckpt) if e.is_file())
