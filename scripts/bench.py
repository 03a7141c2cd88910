"""Benchmarks: SAC updates, model fits and rollouts, buffers, env steps, the whole loop,
each fast path (amp, compile, acting device, pinned staging) on and off side by side, and the
scale-out rows (evaluation episode after episode vs as one vector env; Hopper SAC env steps/s
with env.num_envs 1, 2, 4, 8, sync and async; one run on 1 vs 2 processes).

    python scripts/bench.py [--device cpu|cuda] [--repeats 5] [--rollout-batch 100000]
                            [--fit-rows 10000] [--json PATH] [--skip-loop] [--skip-compile]
                            [--sac-only | --eval-only | --scale-only] [--eval-episodes 10]
                            [--eval-max-steps 1000]

Medians over repeats after a warm-up, on this machine; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from typing import Any

import torch

from mbrl.runtime.utils import configure_cpu, resolve_amp
from mbrl.tools import benchmarks as bench
from mbrl.tools import loop_bench, scale_bench, scale_runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rollout-batch", type=int, default=100_000)
    p.add_argument("--fit-rows", type=int, default=10_000)
    p.add_argument("--json", default=None)
    p.add_argument("--skip-loop", action="store_true", help="skip the whole-loop run")
    p.add_argument("--skip-compile", action="store_true", help="skip the compile=true rows")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--sac-only", action="store_true", help="only the GEMM and SAC update rows")
    only.add_argument("--eval-only", action="store_true", help="only the evaluation scale rows")
    only.add_argument(
        "--scale-only",
        action="store_true",
        help="only the scale-out rows: evaluation, env.num_envs sampling, 1 vs 2 processes",
    )
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes per timed evaluation")
    p.add_argument("--eval-max-steps", type=int, default=1000, help="evaluation episode cap")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here; use --device cpu")
    if args.repeats < 1 or args.fit_rows < 2 or args.rollout_batch < 1:
        p.error("--repeats, --fit-rows (>= 2) and --rollout-batch must be positive")
    if args.eval_episodes < 1 or args.eval_max_steps < 1:
        p.error("--eval-episodes and --eval-max-steps must be positive")
    configure_cpu(args.threads, flush_denormal=True)
    dev = torch.device(args.device)
    res = run_all(bench.Bench(dev, repeats=args.repeats), args)
    print_table(res)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2, default=str)


def run_all(b: bench.Bench, args: argparse.Namespace) -> dict[str, Any]:
    dev, cuda = b.device, b.device.type == "cuda"
    amps = ["off", "bf16", "fp16"] if cuda else ["off", "bf16"]
    default_amp = resolve_amp("auto", dev)
    res: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads"
        + (f", {torch.cuda.get_device_name(dev)}" if cuda else ""),
        "torch": torch.__version__,
        "default_amp": default_amp,
    }
    if args.eval_only or args.scale_only:
        res["eval"] = eval_rows(args)
        if args.scale_only:
            res.update(scale_rows())
        return res
    res["gemm_flop_per_s"] = {n: bench.gemm_flops(b, n) for n in (256, 1024)}
    variants: dict[str, dict[str, Any]] = {f"amp={amp}": {"amp": amp} for amp in amps}
    # Whichever of the two gradient paths agent.grads=auto does not pick on this device:
    other = "autograd" if dev.type == "cpu" else "handwritten"
    variants[f"amp=off, {other}"] = {"amp": "off", "grads": other}
    if not args.skip_compile:
        variants[f"amp={default_amp}, compile"] = {"amp": default_amp, "compile": True}
    res["sac"] = bench.sac_updates(b, variants)
    if args.sac_only:
        return res
    fit = {
        f"{m}, amp={amp}": bench.model_fit(b, m, amp, args.fit_rows)
        for m in ("flow", "gaussian")
        for amp in amps
    }
    if not args.skip_compile:
        for m in ("flow", "gaussian"):
            fit[f"{m}, amp={default_amp}, compile"] = bench.model_fit(
                b, m, default_amp, args.fit_rows, compile=True
            )
    res["model_fit_samples_per_s"] = fit
    res["rollout_transitions_per_s"] = {
        m: bench.model_rollout(b, m, args.rollout_batch) for m in ("flow", "gaussian")
    }
    res["buffer"] = bench.buffer_rates(b)
    if cuda:  # on a CPU both sides of these are the same code path
        res["staging_rows_per_s"] = {
            "pinned": bench.staging(b, pinned=True),
            "pageable": bench.staging(b, pinned=False),
        }
        res["acting_env_steps_per_s"] = {d: bench.acting_loop(b, d) for d in ("train", "cpu")}
    res["env_steps_per_s"] = bench.env_steps(b)
    if not args.skip_loop:
        with tempfile.TemporaryDirectory() as tmp:
            # Denormals kept first: that run's trained agent is then timed both ways.
            kept, trainer = loop_bench.whole_loop(
                dev, os.path.join(tmp, "kept"), flush_denormal=False
            )
            res["trained_sac_updates_per_s"] = loop_bench.trained_sac_update(b, trainer)
            res["whole_loop_denormals_kept"] = kept
            res["whole_loop"] = loop_bench.whole_loop(dev, os.path.join(tmp, "run"))[0]
    res["eval"] = eval_rows(args)
    return res


def scale_rows() -> dict[str, Any]:
    """Hopper SAC env steps/s with env.num_envs copies; one run on 1 vs 2 processes (CPU)."""
    return {"sampling": scale_runs.bench_sampling(), "ddp": scale_runs.bench_ddp()}


def eval_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Hopper evaluation: sequential vs one vector env (sync, async), on the CPU."""
    return scale_bench.bench_eval(
        args.eval_episodes, "hopper", args.repeats, max_episode_steps=args.eval_max_steps
    )


def print_table(res: dict[str, Any]) -> None:
    print(f"machine: {res['machine']}; torch {res['torch']}; amp=auto is {res['default_amp']}")
    print(f"{'benchmark':<48}{'result':>22}")
    for n, f in res.get("gemm_flop_per_s", {}).items():
        print(f"{f'GEMM {n}x{n}x{n}':<48}{f / 1e9:>15.1f} GFLOP/s")
    for name, r in res.get("sac", {}).items():
        print(
            f"{f'SAC update, batch 256, 256x256, {name}':<48}{r['updates_per_s']:>14.1f} upd/s"
            f"  ({r['flop_per_s'] / 1e9:.1f} GFLOP/s, {100 * r['share_of_gemm']:.0f}% of GEMM;"
            f" {r['time_vs_first']:.2f}x the first row's time; first update"
            f" {r['first_update_s']:.1f} s)"
        )
    for k, v in res.get("model_fit_samples_per_s", {}).items():
        print(f"{f'model fit, 7 members, {k}':<48}{v:>12,.0f} samples/s")
    for k, v in res.get("rollout_transitions_per_s", {}).items():
        print(f"{f'rollout, {k}':<48}{v:>12,.0f} transitions/s")
    for k, v in res.get("buffer", {}).items():
        print(f"{f'buffer {k}':<48}{v:>12,.0f}")
    for k, v in res.get("staging_rows_per_s", {}).items():
        print(f"{f'env transition staging, {k}':<48}{v:>12,.0f} rows/s")
    for k, v in res.get("acting_env_steps_per_s", {}).items():
        print(f"{f'act + env step + 20 updates, act_device={k}':<48}{v:>12,.1f} env steps/s")
    if "env_steps_per_s" in res:
        print(f"{'Hopper env steps/s (raw env)':<48}{res['env_steps_per_s']:>12,.0f}")
    for k, v in res.get("trained_sac_updates_per_s", {}).items():
        how = "flushed" if k == "flush" else "kept"
        name = f"SAC update, loop-trained agent, denormals {how}"
        print(f"{name:<48}{v:>14.1f} upd/s")
    for key, how in (("whole_loop", "flushed"), ("whole_loop_denormals_kept", "kept")):
        if key in res:
            w = res[key]
            name = f"whole loop, Hopper MBPO, denormals {how}"
            print(f"{name:<48}{w['env_steps_per_s']:>12.1f} env steps/s  ({w['wall_s']:.0f} s)")
    for r in res.get("sampling", []):
        name = f"Hopper SAC env steps/s, {r['name']}"
        print(
            f"{name:<48}{r['sac_steps_per_s']:>12.1f} steps/s  ({r['sac_speedup']:.2f}x; "
            f"collection alone {r['collect_steps_per_s']:.0f}/s, {r['collect_speedup']:.2f}x)"
        )
    for r in res.get("ddp", []):
        name = f"Hopper SAC G=20, one run on {r['name']}"
        print(f"{name:<48}{r['s_per_1000_steps']:>12.1f} s/1000 steps  ({r['speedup']:.2f}x)")
    for r in res.get("eval", []):
        name = f"Hopper eval, {r['episodes']} episodes, {r['name']}"
        print(
            f"{name:<48}{r['median_s']:>14.3f} s/eval  ({r['speedup']:.2f}x sequential; episode"
            f" length mean {r['episode_length_mean']:.0f}, max {r['episode_length_max']})"
        )


if __name__ == "__main__":
    main()
