"""Profiling mode: run a short, representative window of the real loop under torch.profiler
and report where the time goes (phase table, operator table, a trace for TensorBoard/Perfetto).

The window is the real loop with a shortened config: random exploration up to the first
model phase, one model fit (capped at ``profile.model_epochs`` epochs) with its rollouts,
``profile.updates`` SAC updates, one evaluation and one checkpoint.
"""

from __future__ import annotations

import copy
import json
import math
import os
from typing import Any

from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from mbrl.config import Config
from mbrl.runtime.speed import resolve_amp, resolve_compile
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import resolve_device
from mbrl.trainer import Trainer

PHASES = ("env", "model", "rewarder", "rollout", "sac", "eval", "log", "checkpoint", "profiler")


def window_config(cfg: Config) -> Config:
    """The run's config, shortened to one profiling window (compiled as the whole run would
    be: ``compile=auto`` decides for the run, not for the window)."""
    c = copy.deepcopy(cfg)
    if c.compile == "auto":
        device = resolve_device(c.device)
        amp = resolve_amp(c.amp, device, "sac")
        c.compile = "true" if resolve_compile(c, device, 1, amp).on else "false"
    p = c.profile
    start, per_step = c.algorithm.init_steps, c.algorithm.updates_per_step
    if c.algorithm.name == "mbpo":
        c.model.max_epochs = min(c.model.max_epochs or p.model_epochs, p.model_epochs)
        c.model.max_seconds = None
    c.total_steps = start + max(1, math.ceil(p.updates / max(per_step, 1)))
    c.eval.every, c.eval.episodes = c.total_steps, p.eval_episodes
    c.logger.every = c.total_steps
    c.checkpoint.snapshots = False
    return c


def phase_table(trainer: Trainer, counts: dict[str, float], wall: float) -> list[dict[str, Any]]:
    """Seconds, share of the wall time and a rate per phase ('other' = the rest)."""
    grand = trainer.timer.grand
    rows = []
    units = {
        "env": "env steps/s",
        "sac": "updates/s",
        "rollout": "transitions/s",
        "model": "samples/s",
        "eval": "episodes/s",
    }
    for name in [*PHASES, "other"]:
        secs = wall - sum(grand.values()) if name == "other" else grand.get(name, 0.0)
        rate = counts.get(name, 0.0) / secs if secs > 0 and name in counts else None
        rows.append(
            {
                "phase": name,
                "seconds": secs,
                "share": secs / wall if wall else 0.0,
                "rate": rate,
                "unit": units.get(name, ""),
            }
        )
    return rows


def format_phases(rows: list[dict[str, Any]], wall: float) -> str:
    lines = [f"{'phase':<11}{'seconds':>10}{'share':>8}   rate", "-" * 50]
    for r in rows:
        rate = f"{r['rate']:,.0f} {r['unit']}" if r["rate"] is not None else ""
        lines.append(f"{r['phase']:<11}{r['seconds']:>10.2f}{100 * r['share']:>7.1f}%   {rate}")
    lines.append("-" * 50)
    lines.append(f"{'wall':<11}{wall:>10.2f}{100.0:>7.1f}%")
    return "\n".join(lines)


def run_profile(cfg: Config, run_dir: str) -> dict[str, Any]:
    """Profile one window; writes log/profile/{phases.txt,phases.json,ops.txt,*.pt.trace.json}."""
    wcfg = window_config(cfg)
    out_dir = os.path.join(run_dir, "log", "profile")
    os.makedirs(out_dir, exist_ok=True)
    trainer = Trainer(wcfg, run_dir)
    trainer.warm_up()  # compiling is not the loop: kept out of the window and its timers
    trainer.timer = PhaseTimer(trainer.device)
    activities = [ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    handler = tensorboard_trace_handler(out_dir) if cfg.profile.trace else None
    # Record from the first model phase (or the first update) on: the random exploration
    # before it is cheap, repetitive, and would swell the trace.
    start = wcfg.algorithm.init_steps
    active = wcfg.total_steps - start
    sched = schedule(wait=max(start - 1, 0), warmup=1 if start > 0 else 0, active=active, repeat=1)
    with profile(activities=activities, on_trace_ready=handler, schedule=sched) as prof:

        def step() -> None:
            with trainer.timer.phase("profiler"):  # the profiler's own bookkeeping
                prof.step()

        trainer.step_hook = step
        trainer.run()
        wall = trainer.timer.wall()  # before the trace is written out
    counts = _counts(trainer, run_dir)
    rows = phase_table(trainer, counts, wall)
    table = format_phases(rows, wall)
    sort_key = "self_cuda_time_total" if trainer.device.type == "cuda" else "self_cpu_time_total"
    ops = prof.key_averages().table(sort_by=sort_key, row_limit=cfg.profile.top_ops)
    with open(os.path.join(out_dir, "phases.txt"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    with open(os.path.join(out_dir, "phases.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "wall_seconds": wall,
                "device": str(trainer.device),
                "phases": rows,
                "window": {"env_steps": wcfg.total_steps, "sac_updates": trainer.updates},
                "compile_warmup_s": {k: c.seconds for k, c in trainer.compiled.items()},
            },
            f,
            indent=2,
        )
    with open(os.path.join(out_dir, "ops.txt"), "w", encoding="utf-8") as f:
        f.write(ops + "\n")
    warm = "".join(f", {k} compiled in {c.seconds or 0:.1f} s" for k, c in trainer.compiled.items())
    print(
        f"\nprofiling window: {wcfg.total_steps} env steps, {trainer.updates} SAC updates, "
        f"device {trainer.device}{warm} (before the window)\n{table}\n\n"
        f"top operators by self time:\n{ops}"
    )
    print(
        f"written to {out_dir}: phases.txt, phases.json, ops.txt"
        + (", a torch.profiler trace (*.pt.trace.json)" if cfg.profile.trace else "")
    )
    return {"phases": rows, "wall": wall}


def _counts(trainer: Trainer, run_dir: str) -> dict[str, float]:
    """Work done per phase, read back from the run's metrics.jsonl."""
    counts = {
        "env": float(trainer.env_steps),
        "sac": float(trainer.updates),
        "eval": float(trainer.cfg.eval.episodes),
    }
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        for row in map(json.loads, f):
            counts["rollout"] = counts.get("rollout", 0.0) + (row.get("rollout/transitions") or 0)
            rows, epochs = row.get("model/train_rows"), row.get("model/epochs")
            if rows and epochs:
                counts["model"] = counts.get("model", 0.0) + rows * epochs
    return counts
