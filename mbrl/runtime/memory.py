"""Will the buffers fit? Checked before anything is allocated (docs/usage.md): the real buffer
and MBPO's model pool are allocated once, at full size, on the training device, so a setting
that cannot fit (``rollout.batch_size=1000000000000``) is refused with one message that names
the key, the figure and the largest value that fits, instead of failing in an allocation.
"""

from __future__ import annotations

import dataclasses
import os

import torch

from mbrl.config import Config, ConfigError
from mbrl.schedule import pool_capacity, run_length

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
