"""One run on several processes (``torchrun``), as docs/scaling.md describes it: every rank
steps its own envs into its own buffers, gradients are averaged over ranks before every
optimizer step, rank 0 alone evaluates, logs and writes checkpoints, and every setting keeps
its meaning for the whole run (a batch split into equal shares: :func:`rank_config`).
DI-engine's DDP mode works the same way (its learner all-reduces gradients by hand), which fits
the hand-written SAC gradients and the fused Adam step better than wrapping modules in DDP.
Every helper is a no-op in a single process, so call sites need no ``if``.
"""

from __future__ import annotations

import copy
import datetime
import os

import torch
import torch.distributed as dist

from mbrl.config import Config, ConfigError

# Batch sizes each rank takes an equal share of: the world size must divide them.
SPLIT = ("agent.batch_size", "model.batch_size", "rewarder.batch_size", "rollout.batch_size")


def world_size() -> int:
    """The number of ranks: torch.distributed's once started, else torchrun's WORLD_SIZE."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def start(device: torch.device) -> torch.device:
    """Join torchrun's process group (NCCL for CUDA, else gloo); returns this rank's device."""
    if world_size() == 1 or (dist.is_available() and dist.is_initialized()):
        return device
    if device.type == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    # Tensors on GPUs go through NCCL; the small host-side agreements (stop flags, loop
    # lengths) through gloo on the CPU, so they never wait for queued GPU work.
    backend = "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"
    # Rank 0 evaluates and writes checkpoints while the others wait in their next all-reduce.
    dist.init_process_group(backend, timeout=datetime.timedelta(hours=2))
    return device


def stop() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def check_world(cfg: Config, world: int) -> None:
    """Every setting split over ranks must divide by the world size (before work starts)."""
    if world == 1:
        return
    for key in SPLIT:
        if cfg.algorithm.name != "mbpo" and key.split(".")[0] in ("model", "rewarder", "rollout"):
            continue
        value = _get(cfg, key)
        if value % world:
            raise ConfigError(
                f"{key}={value} is not allowed with {world} processes: each rank takes an equal "
                f"share of it, so it must be a multiple of the world size {world} (e.g. "
                f"{key}={max(world, value // world * world)})"
            )
    if cfg.profile.enabled:
        raise ConfigError("profile=true runs in one process; start it without torchrun")
    if cfg.batch_seeds > 1:
        raise ConfigError(
            f"batch_seeds={cfg.batch_seeds} runs its seeds in one process; start it without "
            "torchrun (or run one seed over several processes with batch_seeds=1)"
        )
    check_gpus(cfg.device, int(os.environ.get("LOCAL_WORLD_SIZE", world)))


def check_gpus(device: str, local_ranks: int, gpus: int | None = None) -> None:
    """On GPUs each local rank takes one: more ranks than GPUs is refused before work starts."""
    gpus = torch.cuda.device_count() if gpus is None else gpus
    if device == "cpu" or (device == "auto" and gpus == 0) or local_ranks <= gpus:
        return
    raise ConfigError(
        f"torchrun started {local_ranks} processes on this machine but torch sees {gpus} "
        f"GPU{'s' if gpus != 1 else ''}: each process trains on its own GPU. Start at most "
        f"{gpus} (torchrun --nproc_per_node={gpus}), or train on the CPU (device=cpu)"
    )


def rank_config(cfg: Config, world: int) -> Config:
    """This rank's share of ``cfg``: each batch size in :data:`SPLIT` divided by ``world``,
    the real buffer and the holdout cap rounded up to their share."""
    if world == 1:
        return cfg
    out = copy.deepcopy(cfg)
    for key in SPLIT:
        group, name = key.split(".")
        setattr(getattr(out, group), name, _get(cfg, key) // world)
    out.buffer.capacity = -(-cfg.buffer.capacity // world)
    out.model.max_holdout = -(-cfg.model.max_holdout // world)
    return out


def _get(cfg: Config, key: str) -> int:
    group, name = key.split(".")
    return int(getattr(getattr(cfg, group), name))
