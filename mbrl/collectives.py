"""Reductions across the processes of one run (``torchrun``): gradients averaged before a
step, holdout scores and statistics pooled, loop lengths and stop flags agreed. Each is the
identity in a single process (no process group), so the algorithm calls them without an
``if``; starting the process group and splitting the settings over ranks is
``mbrl.runtime.distributed``'s. NCCL carries tensors on GPUs, gloo on a CPU; the small
agreements (loop lengths, flags) are host tensors through gloo, so they never wait for queued
GPU work."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


def active() -> bool:
    """Whether gradients and statistics are shared with other ranks."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def average_grads_(grads: Sequence[Tensor], finite: Tensor) -> Tensor:
    """Average ``grads`` over ranks in place (one all-reduce); returns whether every rank's
    loss was finite (a step skipped on one rank is skipped on all, so weights stay equal)."""
    if not active():
        return finite
    flat = torch.cat([g.reshape(-1).float() for g in grads] + [(~finite).float().reshape(1)])
    dist.all_reduce(flat)
    flat[:-1].div_(dist.get_world_size())
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    return flat[-1] == 0


def mean(t: Tensor) -> Tensor:
    """The mean of ``t`` over ranks (a new tensor)."""
    if not active():
        return t
    out = t.detach().clone()
    dist.all_reduce(out)
    return out / dist.get_world_size()


def log_mean_exp(t: Tensor) -> Tensor:
    """log(mean over ranks of exp(t)) for a 0-dim tensor: pools log-mean-exp statistics."""
    if not active():
        return t
    parts = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.detach().contiguous())
    return torch.logsumexp(torch.stack(parts), 0) - math.log(len(parts))


def pooled_moments(x: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and population std over the rows of ``x`` [N, D] of every rank (float64)."""
    x64 = x.double()
    sums = torch.cat([x64.sum(0), x64.square().sum(0), x64.new_full((1,), x.shape[0])])
    dist.all_reduce(sums)
    d = x.shape[1]
    count = sums[-1]
    m = sums[:d] / count
    var = (sums[d : 2 * d] / count - m.square()).clamp_min(0.0)
    return m, var.sqrt()


def min_int(value: int) -> int:
    """The smallest ``value`` over ranks (loop lengths every rank must agree on)."""
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.long, device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())  # sync-ok: a host tensor (gloo)


def any_flag(flag: bool) -> bool:
    """True on every rank when it is true on any (a Ctrl-C seen by one rank, a time cap)."""
    if not active():
        return flag
    t = torch.tensor([float(flag)], device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())  # sync-ok: a host tensor (gloo)


def sum_int(value: int) -> int:
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.long, device=_comm_device())
    dist.all_reduce(t)
    return int(t.item())  # sync-ok: a host tensor (gloo)


def broadcast_(tensors: Sequence[Tensor]) -> None:
    """Rank 0's values into ``tensors`` on every rank (start-up: equal weights everywhere)."""
    if not active():
        return
    for t in tensors:
        dist.broadcast(t.data, src=0)


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (e.g. the run folder that rank 0's hydra made)."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_objects(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` in rank order on rank 0; None on the others."""
    if not active():
        return [obj]
    out: list[Any] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def all_gather_objects(obj: Any) -> list[Any]:
    if not active():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _comm_device() -> torch.device:
    """Where the small agreements' tensors live: the host (gloo serves the CPU on GPUs too)."""
    return torch.device("cpu")
