"""The measuring steps of ``scripts/gpu_check.py`` (the first command on a GPU machine), each
run as ``python -m mbrl.bench.gpu_steps STEP OUT_DIR DEVICE [--quick]`` in a process of its
own, writing ``OUT_DIR/STEP.json``: ``versions``, ``sac`` and ``model``, as the script's usage
text lists them. The file is rewritten as soon as each variant is measured, so a step killed
at its time limit leaves every figure it had. ``--quick`` (the CPU run that tests the check
itself): small sizes, one timed repeat, no bf16."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from mbrl.bench import micro, update_bench
from mbrl.bench.gpu_run import ROOT, replace
from mbrl.compiled import strict, tf32_matmuls
from mbrl.models import MODELS
from mbrl.runtime.speed import resolve_amp
from mbrl.runtime.utils import configure_cpu

PACKAGES = ("numpy", "triton", "gymnasium", "mujoco", "nflows", "hydra-core", "pytest-timeout")


@dataclass(frozen=True)
class Sizes:
    repeats: int  # timed calls per figure (the median is reported)
    fit_rows: int  # rows per member of a fit epoch
    rollout_rows: int  # start states of a rollout step
    updates: int = 20  # SAC updates per block (MBPO's G)
    batch: int = 256  # SAC batch
    bf16: bool = True  # the SAC block at amp=bf16 too


FULL = Sizes(repeats=5, fit_rows=5000, rollout_rows=100_000)
QUICK = Sizes(repeats=1, fit_rows=300, rollout_rows=2000, bf16=False)


class Figures:
    """A step's JSON file, rewritten whole (atomically) whenever a figure is added."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        self._write()

    def put(self, section: str, name: str, value: Any) -> None:
        self.data.setdefault(section, {})[name] = value
        self._write()

    def _write(self) -> None:
        replace(self.path, json.dumps(self.data, indent=2, default=str))


def step_versions(fig: Figures, b: micro.Bench, sizes: Sizes) -> None:
    """What this machine runs: interpreter, libraries, device, checkout."""
    for key, value in versions().items():
        fig.put("versions", key, value)
    for key, value in device_facts(b.device).items():
        fig.put("device", key, value)


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    git = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    out["commit"] = git.stdout.strip() or None
    out["strict"] = strict()
    return out


def device_facts(device: torch.device) -> dict[str, Any]:
    out: dict[str, Any] = {"device": str(device), "cpu_cores": os.cpu_count()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        out |= {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "bf16": torch.cuda.is_bf16_supported(),
        }
    return out


def step_sac(fig: Figures, b: micro.Bench, sizes: Sizes) -> None:
    """The G-update block: eager, then compiled (+ graphed on CUDA), then both at bf16."""
    cuda = b.device.type == "cuda"
    fast = "compiled, graphed" if cuda else "compiled"
    variants = {
        "eager": {"amp": "off", "compile": False},
        fast: {"amp": "off", "compile": True, "graphs": cuda},
        f"{fast}, amp=bf16": {"amp": "bf16", "compile": True, "graphs": cuda},
        "eager, amp=bf16": {"amp": "bf16", "compile": False},
    }
    if not sizes.bf16:
        variants = {k: v for k, v in variants.items() if v["amp"] == "off"}
    for name, v in variants.items():
        updates, warmup = update_bench.sac_block(b.device, {**v, "tf32": cuda}, sizes.batch)
        for _ in range(update_bench.WARM_BLOCKS):  # (the fourth captures the CUDA graph)
            updates(sizes.updates)
        seconds = b.median(partial(updates, sizes.updates))
        fig.put("sac", name, _row(updates, v, warmup, updates_per_s=sizes.updates / seconds))
        _peak(fig, b.device)


def step_model(fig: Figures, b: micro.Bench, sizes: Sizes) -> None:
    """Each model's fit epoch at the run's settings, its rollout step, then its fit eager."""
    cuda = b.device.type == "cuda"
    amp = resolve_amp("auto", b.device, "model")
    fast = {"amp": amp, "compile": True, "graphs": cuda, "tf32": cuda}
    for model in MODELS:
        name = f"{model}, {'compiled, graphed' if cuda else 'compiled'}, amp={amp}"
        fig.put("fit", name, _fit_row(b, {**fast, "model": model}, sizes.fit_rows))
        _peak(fig, b.device)
    for model in MODELS:
        with tf32_matmuls(cuda):  # (a run's rollouts use TF32 on CUDA)
            rate = micro.model_rollout(b, model, sizes.rollout_rows)
        fig.put("rollout", f"{model}, {sizes.rollout_rows:,} rows", {"transitions_per_s": rate})
        _peak(fig, b.device)
    for model in MODELS:
        eager = {"amp": amp, "compile": False, "model": model, "tf32": cuda}
        fig.put("fit", f"{model}, eager, amp={amp}", _fit_row(b, eager, sizes.fit_rows))


def _fit_row(b: micro.Bench, v: dict[str, Any], rows: int) -> dict[str, Any]:
    epoch, trainer, warmup = update_bench.fit_epoch(b.device, v, rows)
    seconds = b.median(epoch)
    rates = {"rows_per_s": rows / seconds, "samples_per_s": trainer.cfg.members * rows / seconds}
    return _row(trainer.step, v, warmup, **rates)


def _row(timed: Any, v: dict[str, Any], warmup: float, **rates: float) -> dict[str, Any]:
    """A variant's rates, its compile warm-up and what ran (``timed.ran``); graphed: whether
    the CUDA graph was captured and replayed."""
    row = {**rates, "warmup_s": warmup, "ran": timed.ran}
    if v.get("graphs"):
        row["graph_captured"] = timed.ran.endswith("graphed") and timed.replays > 0
    return row


def _peak(fig: Figures, device: torch.device) -> None:
    if device.type == "cuda":
        fig.put("memory", "peak_gpu_mb", torch.cuda.max_memory_allocated(device) / 2**20)


STEPS: dict[str, Callable[[Figures, micro.Bench, Sizes], None]] = {
    "versions": step_versions,
    "sac": step_sac,
    "model": step_model,
}


def main(argv: list[str]) -> None:
    name, out_dir, device = argv[0], argv[1], torch.device(argv[2])
    sizes = QUICK if "--quick" in argv[3:] else FULL
    configure_cpu(1, flush_denormal=True)
    fig = Figures(os.path.join(out_dir, f"{name}.json"))
    STEPS[name](fig, micro.Bench(device, repeats=sizes.repeats), sizes)


if __name__ == "__main__":
    main(sys.argv[1:])
