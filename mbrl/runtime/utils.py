"""Process set-up: device choice, torch threads, memory read-out (seeding: mbrl/seeding.py)."""

from __future__ import annotations

import os

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
