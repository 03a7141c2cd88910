"""Process set-up: device choice, torch threads, seeding and RNG state capture."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def configure_cpu(threads: int, flush_denormal: bool) -> None:
    """Intra-op threads per process, and whether denormal floats are flushed to zero.

    One thread is fastest on small shared CPUs: a multi-threaded matmul stalls whenever another
    process keeps a core busy. x86 CPUs compute on denormals (|x| < 1.2e-38 in fp32) far slower
    than on normal numbers, and a trained network produces them (Adam's first moment of a
    weight whose gradient stopped decays through that range, as do gradients through saturated
    units); docs/benchmarks.md has both measurements. Flushing sets the FTZ/DAZ
    flags of this thread, and of the threads it starts afterwards; it is a no-op elsewhere.
    """
    if threads > 0:
        torch.set_num_threads(threads)
    torch.set_flush_denormal(flush_denormal)


def rss_mb() -> float:
    """Resident memory of this process in MiB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, AttributeError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Inside, torch's global generators start from ``seed``; after, they are as they were.
    A component built inside (its initial weights) depends on the run's seed alone, not on
    what was built or drawn before it: runs that differ only in the model start from the
    same agent."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def make_generator(device: torch.device, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "generators": {k: g.get_state() for k, g in generators.items()},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    for key, gen in generators.items():
        gen.set_state(state["generators"][key])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
