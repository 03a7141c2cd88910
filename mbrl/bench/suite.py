"""The benchmark table of ``scripts/bench.py``: which rows run (each from its module here:
``micro``, ``update_bench``, ``seed_bench``, ``loop_bench``, ``scale_bench``), and how they
print."""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from typing import Any

import torch

from mbrl.bench import loop_bench, scale_bench, seed_bench, update_bench
from mbrl.bench import micro as bench
from mbrl.runtime.progress import episodes
from mbrl.runtime.speed import resolve_amp
from mbrl.runtime.utils import configure_cpu


def main(description: str) -> None:
    """``scripts/bench.py``'s command line (``description``: its usage text)."""
    p = argparse.ArgumentParser(description=description.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rollout-batch", type=int, default=100_000)
    p.add_argument("--fit-rows", type=int, default=5000, help="rows per member (at most 5000)")
    p.add_argument("--reference", default=None, help="an older checkout to time side by side")
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
    p.add_argument(
        "--seed-batch",
        default=None,
        help="seeds per batch to time, e.g. 1,4,10: S solo update blocks vs one batched block",
    )
    p.add_argument("--eval-episodes", type=int, default=10, help="episodes per timed evaluation")
    p.add_argument("--eval-max-steps", type=int, default=1000, help="evaluation episode cap")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here; use --device cpu")
    if args.repeats < 1 or not 2 <= args.fit_rows <= 5000 or args.rollout_batch < 1:
        p.error("--repeats and --rollout-batch must be positive, --fit-rows in [2, 5000]")
    if args.reference and not os.path.isfile(os.path.join(args.reference, "mbrl", "trainer.py")):
        p.error(f"--reference {args.reference!r} is not a FlowMBPO checkout (no mbrl/trainer.py)")
    if args.eval_episodes < 1 or args.eval_max_steps < 1:
        p.error("--eval-episodes and --eval-max-steps must be positive")
    try:
        args.seed_batch = [int(s) for s in args.seed_batch.split(",")] if args.seed_batch else []
    except ValueError:
        p.error(f"--seed-batch {args.seed_batch!r}: give seed counts like 1,4,10")
    if any(s < 1 for s in args.seed_batch):
        p.error(f"--seed-batch {args.seed_batch}: every seed count must be 1 or more")
    configure_cpu(args.threads, flush_denormal=True)
    res = run_all(bench.Bench(torch.device(args.device), repeats=args.repeats), args)
    print_table(res)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2, default=str)


def run_all(b: bench.Bench, args: argparse.Namespace) -> dict[str, Any]:
    dev, cuda = b.device, b.device.type == "cuda"
    res: dict[str, object] = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads"
        + (f", {torch.cuda.get_device_name(dev)}" if cuda else ""),
        "torch": torch.__version__,
        "default_amp": {c: resolve_amp("auto", dev, c) for c in ("sac", "model")},
    }
    if args.eval_only or args.scale_only:
        res["eval"] = scale_bench.bench_eval(args.eval_episodes, args.repeats, args.eval_max_steps)
        if args.scale_only:  # env.num_envs copies; one run on 1 vs 2 processes (CPU)
            res |= {"sampling": scale_bench.bench_sampling(), "ddp": scale_bench.bench_ddp()}
        return res
    res["gemm_flop_per_s"] = {n: bench.gemm_flops(b, n) for n in (256, 1024)}
    settings = update_bench.settings(cuda, not args.skip_compile)
    res["sac"] = update_bench.sac_updates(b, settings, reference=args.reference)
    if args.seed_batch:
        res["seed_batch"] = seed_bench.seed_batches(b, args.seed_batch)
        res["seed_batch_fit"] = seed_bench.fit_batches(b, args.seed_batch)
    if cuda:
        res["peak_gpu_mb"] = torch.cuda.max_memory_allocated(dev) / 2**20
    if args.sac_only:
        return res
    fits = {
        f"{m}, {k}": {**v, "model": m} for m in ("flow", "gaussian") for k, v in settings.items()
    }
    res["model_fit"] = update_bench.model_fits(b, fits, args.fit_rows, args.reference)
    if not args.skip_compile:
        res["compile_warmup_s"] = update_bench.compile_warmups(dev.type)
    res["rollout_transitions_per_s"] = {
        m: bench.model_rollout(b, m, args.rollout_batch) for m in ("flow", "gaussian")
    }
    res["buffer"] = bench.buffer_rates(b)
    if cuda:  # on a CPU both sides of these are the same code path
        res["staging_rows_per_s"] = {
            k: bench.staging(b, k == "pinned") for k in ("pinned", "pageable")
        }
        res["acting_env_steps_per_s"] = {d: bench.acting_loop(b, d) for d in ("train", "cpu")}
        res["peak_gpu_mb"] = torch.cuda.max_memory_allocated(dev) / 2**20
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
    res["eval"] = scale_bench.bench_eval(args.eval_episodes, args.repeats, args.eval_max_steps)
    return res


def print_table(res: dict[str, Any]) -> None:
    amp = res["default_amp"]
    print(f"machine: {res['machine']}; torch {res['torch']}; amp=auto is {amp}")
    print(f"{'benchmark':<52}{'result':>18}")
    for n, f in res.get("gemm_flop_per_s", {}).items():
        print(f"{f'GEMM {n}x{n}x{n}':<52}{f / 1e9:>11.1f} GFLOP/s")
    for name, r in res.get("sac", {}).items():
        warm = f"; warm-up {r['warmup_s']:.1f} s" if r.get("warmup_s") else ""
        print(
            f"{f'SAC, 20-update block, batch 256, {name}':<52}{r['updates_per_s']:>10.1f} upd/s"
            f"  ({r['flop_per_s'] / 1e9:.1f} GFLOP/s, {100 * r['share_of_gemm']:.0f}% of GEMM;"
            f" {r['time_vs_first']:.2f}x the first row's time{warm}; ran: {r['ran']})"
        )
    for k, r in res.get("seed_batch", {}).items():
        print(
            f"{f'SAC, {k}: seeds batched vs solo, per seed':<52}"
            f"{r['batched_updates_per_s_per_seed']:>10.1f} upd/s  (solo blocks "
            f"{r['solo_updates_per_s_per_seed']:.1f}; together {r['batched_updates_per_s_all']:.0f}"
            f" vs {r['solo_updates_per_s_all']:.0f}; {r['time_vs_solo']:.2f}x the solo blocks' "
            f"time; ran: {r['ran']})"
        )
    for k, r in res.get("seed_batch_fit", {}).items():
        print(
            f"{f'flow model fit, {k}: seeds batched vs solo, per seed':<52}"
            f"{r['batched_steps_per_s_per_seed']:>10.1f} steps/s  (solo fits "
            f"{r['solo_steps_per_s_per_seed']:.1f}; {r['time_vs_solo']:.2f}x the solo fits' "
            f"time; ran: {r['ran']})"
        )
    for k, r in res.get("model_fit", {}).items():
        warm = f"warm-up {r['warmup_s']:.1f} s; " if r.get("warmup_s") else ""
        print(
            f"{f'model fit, 7 members, {k}':<52}{r['samples_per_s']:>10,.0f} samples/s"
            f"  ({warm}ran: {r['ran']})"
        )
    for when, w in res.get("compile_warmup_s", {}).items():
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in w.items())
        print(f"{f'compile warm-up, inductor cache {when}':<52}  {parts}")
    for k, v in res.get("rollout_transitions_per_s", {}).items():
        print(f"{f'rollout, {k}':<52}{v:>10,.0f} transitions/s")
    for k, v in res.get("buffer", {}).items():
        print(f"{f'buffer {k}':<52}{v:>10,.0f}")
    for k, v in res.get("staging_rows_per_s", {}).items():
        print(f"{f'env transition staging, {k}':<52}{v:>10,.0f} rows/s")
    for k, v in res.get("acting_env_steps_per_s", {}).items():
        print(f"{f'act + env step + 20 updates, act_device={k}':<52}{v:>10,.1f} env steps/s")
    if "env_steps_per_s" in res:
        print(f"{'Hopper env steps/s (raw env)':<52}{res['env_steps_per_s']:>10,.0f}")
    if "peak_gpu_mb" in res:
        print(f"{'peak GPU memory':<52}{res['peak_gpu_mb']:>10,.0f} MB")
    for k, v in res.get("trained_sac_updates_per_s", {}).items():
        how = "flushed" if k == "flush" else "kept"
        print(f"{f'SAC update, loop-trained agent, denormals {how}':<52}{v:>10.1f} upd/s")
    for key, how in (("whole_loop", "flushed"), ("whole_loop_denormals_kept", "kept")):
        if key in res:
            w = res[key]
            name = f"whole loop, Hopper MBPO, denormals {how}"
            print(f"{name:<52}{w['env_steps_per_s']:>10.1f} env steps/s  ({w['wall_s']:.0f} s)")
    for r in res.get("sampling", []):
        name = f"Hopper SAC env steps/s, {r['name']}"
        print(
            f"{name:<52}{r['sac_steps_per_s']:>10.1f} steps/s  ({r['sac_speedup']:.2f}x; "
            f"collection alone {r['collect_steps_per_s']:.0f}/s, {r['collect_speedup']:.2f}x)"
        )
    for r in res.get("ddp", []):
        name = f"Hopper SAC G=20, one run on {r['name']}"
        print(f"{name:<52}{r['s_per_1000_steps']:>10.1f} s/1000 steps  ({r['speedup']:.2f}x)")
    for r in res.get("eval", []):
        name = f"Hopper eval, {episodes(r['episodes'])}, {r['name']}"
        print(
            f"{name:<52}{r['median_s']:>12.3f} s/eval  ({r['speedup']:.2f}x sequential; episode"
            f" length mean {r['episode_length_mean']:.0f}, max {r['episode_length_max']})"
        )
