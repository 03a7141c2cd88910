"""How fast ``scripts/seeds.py``'s runs went in one invocation, past the random steps: each
run's env steps per second, all of them together, what ran (compiled, graphed), whether MPS
was on, and the GPU memory in use while they ran.

A run's rate counts the intervals between its log lines of this invocation past
``algorithm.init_steps``, less each process's first (a fresh run's first model fit, or a
resume, with their compiles), so that fresh and continued runs compare (docs/benchmarks.md).
The GPU memory is the machine's (``nvidia-smi``, every few seconds), with a run's own peak
where its metrics log one (``GPU_MEMORY_KEY``).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
from typing import Any

import numpy as np

from mbrl.runtime.timer import resumed_between
from mbrl.tools.mps import find_tool
from mbrl.tools.plotting import load_run

GPU_MEMORY_KEY = "process/gpu_peak_mb"  # a run's own peak GPU memory, where it logs one
SAMPLE_EVERY = 5.0  # seconds between nvidia-smi samples


def run_speed(path: str, since: float) -> dict[str, Any] | None:
    """A run's figures past its random steps, from its lines stamped at or after ``since``:
    env steps, seconds, first and last stamp, what ran, its peak GPU memory if logged
    (None: no such interval yet)."""
    if not os.path.isfile(os.path.join(path, "metrics.jsonl")):
        return None
    run = load_run(path)
    rows = [r for r in run.rows if r.get("time/wall") is not None and "time" in r]
    init = int(str(run.config.get("algorithm.init_steps", 0)))  # (0: no config.yaml yet)
    steps, seconds, stamps = 0, 0.0, []
    warm = False  # whether this process's first interval past the random steps has passed
    for prev, row in itertools.pairwise(rows):
        stopped = row.get("time/paused", 0.0)  # (Ctrl-Z or kill -STOP: not the run's time)
        gap = row["time"] - prev["time"] - stopped
        if resumed_between(prev, row):  # (a resume: left out)
            warm = prev["step"] >= init  # (its first model fit is still to come if not)
            continue
        if prev["time"] < since or prev["step"] < init:
            continue
        if not warm:  # (a fresh run's first model fit, compiles and graph captures)
            warm = True
            continue
        steps += row["step"] - prev["step"]
        seconds += gap
        stamps += [prev["time"], row["time"]]
    if not steps:
        return None
    ran = {k: v for k, v in rows[-1].items() if k.startswith("speed/") and k != "speed/device"}
    peaks = [r[GPU_MEMORY_KEY] for r in rows if r["time"] >= since and r.get(GPU_MEMORY_KEY)]
    out = {"steps": steps, "seconds": seconds, "first": min(stamps), "last": max(stamps)}
    out.update(ran=ran, gpu_peak_mb=max(peaks) if peaks else None)
    return out


def speed_lines(invocations: list[dict[str, Any]]) -> list[str]:
    """One line per invocation: its figures past the random steps, or why it has none."""
    lines = []
    for i, inv in enumerate(invocations, start=1):
        named = {k: r["past_random"] for k, r in inv["runs"].items() if r.get("past_random")}
        runs = list(named.values())
        if not runs:
            lines.append(
                f"invocation {i}, past the random steps: not measured (no run logged two "
                "intervals past its random steps in one process; the first, with its first "
                "model fit and compiles, is left out)"
            )
            continue
        rates = {k: r["steps"] / r["seconds"] for k, r in named.items()}
        each = list(rates.values())
        text = (
            f"invocation {i}, past the random steps: {len(runs)} of {len(inv['runs'])} runs, "
            f"{np.median(each):,.1f} env steps/s each (median; {min(each):,.1f}-"
            f"{max(each):,.1f}){_by_variant(rates)}, {_together(inv, runs, each)}; "
            f"MPS {'on' if inv.get('mps') else 'off'}"
        )
        ran = sorted({f"{k[6:].replace('_', ' ')} {v}" for r in runs for k, v in r["ran"].items()})
        text += f"; ran: {', '.join(ran) or 'not logged'}"
        own = [r["gpu_peak_mb"] for r in runs if r.get("gpu_peak_mb")]
        if own:
            text += f"; GPU memory per run: {min(own):,.0f}-{max(own):,.0f} MB (peak)"
        gpu = inv.get("gpu_memory_mb")
        if gpu:
            text += (
                f"; GPU memory in use: {gpu['peak']:,.0f} MB at most ({gpu['before']:,.0f} before)"
            )
        lines.append(text)
    return lines


def _by_variant(rates: dict[str, float]) -> str:
    """Each variant's median and range of its runs' ``rates`` where the runs are of several
    (their speeds differ: SAC alone against MBPO; one median over both would describe
    neither), else nothing."""
    groups: dict[str, list[float]] = {}
    for name, rate in rates.items():  # (a run's name: <variant folder>/seed_<N>)
        groups.setdefault(name.rsplit("/", 1)[0], []).append(rate)
    if len(groups) < 2:
        return ""
    parts = [
        f"{variant} {np.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f}, {len(v)} runs)"
        for variant, v in groups.items()
    ]
    return f" [by variant: {'; '.join(parts)}]"


def _together(inv: dict[str, Any], runs: list[dict[str, Any]], each: list[float]) -> str:
    """All the runs' rate: the sum of their rates where they all ran at once (no more runs
    than processes hold: their windows differ, as fresh and continued runs warm up
    differently), else their steps over the time at least one of them was in its counted
    window (from its first counted interval to its last): runs one after another are not
    charged for the starts, random steps and first fits between their windows."""
    if len(inv["runs"]) <= inv.get("procs", 0) * inv.get("batch", 1):
        return f"{sum(each):,.1f} together (summed)"
    covered, end = 0.0, float("-inf")
    for first, last in sorted((r["first"], r["last"]) for r in runs):
        covered += max(last - max(first, end), 0.0)
        end = max(end, last)
    return f"{sum(r['steps'] for r in runs) / covered:,.1f} together"


class GpuMemory:
    """Samples the memory in use on the machine's GPUs (MB, summed) in a thread, until
    ``stop()``; ``figures()``: the first sample and the peak (None without nvidia-smi)."""

    def __init__(self, command: list[str] | None = None) -> None:
        tool = find_tool("nvidia-smi")
        query = [tool or "nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"]
        self.command = command or query
        self.samples: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            try:
                out = subprocess.run(self.command, capture_output=True, text=True, timeout=10)
                used = [float(x) for x in out.stdout.split()]
            except (OSError, ValueError, subprocess.TimeoutExpired):
                return  # (no nvidia-smi, or it cannot answer: no figure)
            if out.returncode != 0 or not used:
                return
            self.samples.append(sum(used))
            if self._done.wait(SAMPLE_EVERY):
                return

    def figures(self) -> dict[str, float] | None:
        if not self.samples:
            return None
        return {"before": self.samples[0], "peak": max(self.samples)}

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=15)
