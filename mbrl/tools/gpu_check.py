"""The measuring steps of ``scripts/gpu_check.py`` (the first command on a GPU machine), each
run as ``python -m mbrl.tools.gpu_check STEP OUT_DIR [DEVICE]`` in its own process under its own
time limit, each writing ``OUT_DIR/STEP.json``:

- ``sac``: the 20-update SAC block, eager vs compiled vs CUDA-graphed, amp off vs bf16 (updates/s,
  share of the GEMM rate, warm-up seconds), and peak GPU memory;
- ``fit``: model-fit samples/s (flow, Gaussian; eager vs graphed, the model's amp=auto) and
  rollout transitions/s (100 000 rows, one step);
- ``warmup``: compile times of the SAC update and the fit steps, inductor cache cold and warm.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from mbrl.runtime.speed import resolve_amp
from mbrl.runtime.utils import configure_cpu
from mbrl.tools import benchmarks, update_bench, warmup_bench


def _peak_mb(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def step_sac(b: benchmarks.Bench) -> dict[str, Any]:
    rows = update_bench.sac_updates(b, update_bench.settings(b.device.type == "cuda"))
    return {"sac": rows, "peak_gpu_mb": _peak_mb(b.device)}


def step_fit(b: benchmarks.Bench) -> dict[str, Any]:
    amp = resolve_amp("auto", b.device, "model")
    graphs = b.device.type == "cuda"
    fits = {
        f"{m}, {way}, amp={amp}": {"model": m, "amp": amp, "compile": c, "graphs": c and graphs}
        for m in ("flow", "gaussian")
        for way, c in (("eager", False), ("graphed" if graphs else "compiled", True))
    }
    return {
        "model_fit": update_bench.model_fits(b, fits),
        "rollout_transitions_per_s": {
            m: benchmarks.model_rollout(b, m) for m in ("flow", "gaussian")
        },
        "peak_gpu_mb": _peak_mb(b.device),
    }


def step_warmup(b: benchmarks.Bench) -> dict[str, Any]:
    return {"compile_warmup_s": warmup_bench.compile_warmups(b.device.type)}


STEPS: dict[str, Callable[[benchmarks.Bench], dict[str, Any]]] = {
    "sac": step_sac,
    "fit": step_fit,
    "warmup": step_warmup,
}


def main(argv: list[str]) -> None:
    name, out_dir = argv[0], argv[1]
    device = torch.device(argv[2] if len(argv) > 2 else "cuda")
    repeats = int(argv[3]) if len(argv) > 3 else 5
    configure_cpu(1, flush_denormal=True)
    result = STEPS[name](benchmarks.Bench(device, repeats=repeats))
    with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1:])
