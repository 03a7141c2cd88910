"""Process set-up: device choice, torch threads, memory read-out (seeding: mbrl/seeding.py);
report files written whole."""

from __future__ import annotations

import os
import re

import torch


def hydra_value(text: str) -> str:
    """``text`` as the value of a hydra override that reads back as ``text``: as it is when
    hydra reads it so (plain ASCII, not a number or ``null``), else double-quoted (a multirun
    job's folder, ``1_env=pendulum,seed=3``, holds ``=`` and ``,``, which hydra would parse as
    a sweep or a syntax error)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if re.fullmatch(r"[A-Za-z0-9_./+-]+", text):
        try:
            (o,) = OverridesParser.create().parse_overrides([f"key={text}"])
            if o.value() == text:
                return text
        except Exception:  # (hydra's parse errors: quote it)
            pass
    # In hydra's quoted strings a backslash escapes only a quote or the backslashes before
    # one (or before the closing quote): double those, then escape the quotes.
    escaped = re.sub(r'\\+(?="|$)', lambda m: m.group(0) * 2, text).replace('"', '\\"')
    return f'"{escaped}"'


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def device_text(device: torch.device) -> str:
    """The machine a run ran on, as its figures name it: the GPU's model, or the CPU's cores
    (``NVIDIA H200``, ``CPU (2 cores)``)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return f"{device.type.upper()} ({os.cpu_count() or 1} cores)"


def configure_cpu(threads: int, flush_denormal: bool) -> None:
    """Intra-op threads per process, and whether denormal floats are flushed to zero (the
    FTZ/DAZ flags of this thread and those it starts; a no-op off x86). Why each, measured:
    docs/benchmarks.md ("Threads"; "Denormals flushed", which a trained network produces and
    x86 computes on far slower)."""
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


def write_atomic(path: str, text: str) -> None:
    """``text`` to ``path`` through a temporary file: a reader sees the old or the new file."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
