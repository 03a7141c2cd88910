"""Benchmarks: SAC updates, model fits and rollouts, buffers, env steps, the whole loop.

    python scripts/bench.py [--device cpu|cuda] [--repeats 5] [--rollout-batch 100000]
                            [--fit-rows 10000] [--json PATH] [--skip-loop]

Medians over repeats after a warm-up, on this machine; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile

import torch

from mbrl import bench
from mbrl.utils import set_threads


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rollout-batch", type=int, default=100_000)
    p.add_argument("--fit-rows", type=int, default=10_000)
    p.add_argument("--json", default=None)
    p.add_argument("--skip-loop", action="store_true", help="skip the whole-loop run")
    args = p.parse_args()
    set_threads(args.threads)
    dev = torch.device(args.device)
    b = bench.Bench(dev, repeats=args.repeats)
    amps = ["off", "bf16"] if dev.type == "cpu" else ["off", "bf16", "fp16"]
    res: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads"
        + (f", {torch.cuda.get_device_name(dev)}" if dev.type == "cuda" else ""),
        "torch": torch.__version__,
        "gemm_flop_per_s": {n: bench.gemm_flops(b, n) for n in (256, 1024)},
    }
    res["sac"] = {amp: bench.sac_update(b, amp) for amp in amps}
    res["model_fit_samples_per_s"] = {
        f"{m}/{amp}": bench.model_fit(b, m, amp, args.fit_rows)
        for m in ("flow", "gaussian")
        for amp in amps
    }
    res["rollout_transitions_per_s"] = {
        m: bench.model_rollout(b, m, args.rollout_batch) for m in ("flow", "gaussian")
    }
    res["buffer"] = bench.buffer_rates(b)
    res["env_steps_per_s"] = bench.env_steps(b)
    if not args.skip_loop:
        with tempfile.TemporaryDirectory() as tmp:
            res["whole_loop"] = bench.whole_loop(dev, os.path.join(tmp, "run"))
    print_table(res)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2, default=str)


def print_table(res: dict) -> None:  # type: ignore[type-arg]
    peak = max(res["gemm_flop_per_s"].values())
    print(f"machine: {res['machine']}; torch {res['torch']}")
    print(f"{'benchmark':<44}{'result':>22}")
    for n, f in res["gemm_flop_per_s"].items():
        print(f"{f'GEMM {n}x{n}x{n}':<44}{f / 1e9:>15.1f} GFLOP/s")
    for amp, r in res["sac"].items():
        share = r["flop_per_s"] / peak
        print(
            f"{f'SAC update, batch 256, 256x256, amp={amp}':<44}{r['updates_per_s']:>14.1f} upd/s"
            f"  ({r['flop_per_s'] / 1e9:.1f} GFLOP/s, {100 * share:.0f}% of GEMM)"
        )
    for k, v in res["model_fit_samples_per_s"].items():
        print(f"{f'model fit, 7 members, {k}':<44}{v:>12,.0f} samples/s")
    for k, v in res["rollout_transitions_per_s"].items():
        print(f"{f'rollout, {k}':<44}{v:>12,.0f} transitions/s")
    for k, v in res["buffer"].items():
        print(f"{f'buffer {k}':<44}{v:>12,.0f}")
    print(f"{'Hopper env steps/s (raw env)':<44}{res['env_steps_per_s']:>12,.0f}")
    if "whole_loop" in res:
        w = res["whole_loop"]
        name = "whole loop, fixed short Hopper MBPO config"
        print(f"{name:<44}{w['env_steps_per_s']:>12.1f} env steps/s  ({w['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
