"""Profiling mode (``profile=true``): a short, representative window of the real loop under
torch.profiler, and where the time goes (phase table, operator table, a trace for
TensorBoard/Perfetto), with a whole run's time per phase projected from the window's rates
(:func:`mbrl.runtime.eta.whole_run`). What the window runs and why: docs/usage.md.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from mbrl.config import Config
from mbrl.runtime.eta import whole_run, whole_run_text
from mbrl.runtime.speed import CompileChoice, resolve_amp, resolve_compile
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import resolve_device, write_atomic
from mbrl.schedule import first_model_phase
from mbrl.tools.plotting import read_metrics
from mbrl.trainer import Trainer

# torch.profiler's C++ side (kineto) logs lines such as "USDT:2026-01-01 12:00:00 1:1
# SyncActivityProfilerHandler.cpp:52] profiler_start" straight to file descriptor 2.
KINETO_LINE = re.compile(r"^[A-Z]+:\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \S+\.cpp:\d+\]")
PHASES = ("env", "model", "rewarder", "rollout", "sac", "eval", "log", "checkpoint", "profiler")


def window_config(cfg: Config) -> Config:
    """The run's config, shortened to one profiling window (compiled as the whole run would
    be: ``compile=auto`` decides for the run, not for the window)."""
    c = copy.deepcopy(cfg)
    if (choice := run_compile(c)) is not None:
        c.compile = "true" if choice.on else "false"
    p = c.profile
    if c.algorithm.name == "mbpo" and p.model_epochs is not None:
        c.model.max_epochs = min(c.model.max_epochs or p.model_epochs, p.model_epochs)
    c.total_steps = recorded_from(c) + max(
        1, math.ceil(p.updates / max(c.algorithm.updates_per_step, 1))
    )
    c.eval.every, c.eval.episodes = c.total_steps, p.eval_episodes
    c.logger.every = c.total_steps
    c.checkpoint.snapshots = False
    return c


def run_compile(cfg: Config) -> CompileChoice | None:
    """``compile=auto``'s choice for the whole run of ``cfg`` (None: compile is set), which
    its profiling window follows."""
    if cfg.compile != "auto":
        return None
    device = resolve_device(cfg.device)
    return resolve_compile(cfg, device, 1, resolve_amp(cfg.amp, device, "sac"))


def window_compile_why(cfg: Config) -> str | None:
    """The start block's compile line for the window of ``cfg`` with ``compile=auto``: the
    whole run's choice and why (the window's own config says compile=true or false)."""
    choice = run_compile(cfg)
    if choice is None:
        return None
    return choice.why.replace("(auto: ", "(auto, for the whole run the window profiles: ", 1)


def recorded_from(cfg: Config) -> int:
    """The env step the window's recording starts at: MBPO's second model phase (its fit is
    a later one), or, without model phases, the end of the random steps."""
    init = cfg.algorithm.init_steps
    if cfg.algorithm.name != "mbpo":
        return init
    return first_model_phase(cfg) + cfg.mbpo.model_train_freq


def phase_table(trainer: Trainer, run_dir: str, wall: float) -> list[dict[str, Any]]:
    """Seconds, share of the wall time and a rate per phase ('other' = the rest): the work
    done per second (model: rows x epochs, each row through every member; rollout:
    transitions written, from the run's metrics.jsonl)."""
    grand, work = trainer.timer.grand, trainer.clock.work.done
    counts = {k: work[k] for k in ("env", "sac", "model", "eval")}  # (eval: episodes)
    logged = read_metrics(os.path.join(run_dir, "metrics.jsonl"))
    counts["rollout"] = float(sum(row.get("rollout/transitions") or 0 for row in logged))
    rows = []
    units = {
        "env": "env steps/s",
        "sac": "updates/s",
        "rollout": "transitions/s",
        "model": "rows/s",  # rows x epochs, each row through every member
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
    if (why := window_compile_why(cfg)) is not None:  # (the start block's, as the run's)
        trainer.speed = dataclasses.replace(trainer.speed, why=why)
    trainer.warm_up()  # compiling is not the loop: kept out of the window and its timers
    trainer.timer = PhaseTimer(trainer.device)
    activities = [ProfilerActivity.CPU]
    if trainer.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    handler = tensorboard_trace_handler(out_dir) if cfg.profile.trace else None
    # Record from the second model phase on: what comes before (the random steps, the first
    # fit and the loop between) would swell the trace with what a run does rarely.
    start = recorded_from(wcfg)
    active = wcfg.total_steps - start
    sched = schedule(wait=max(start - 1, 0), warmup=1 if start > 0 else 0, active=active, repeat=1)
    prof = profile(activities=activities, on_trace_ready=handler, schedule=sched)
    quiet = lambda: without_kineto_lines(trainer.progress.write)  # noqa: E731

    def step() -> None:
        with trainer.timer.phase("profiler"), quiet():  # the profiler's own bookkeeping
            prof.step()

    with quiet():
        prof.start()
    try:
        trainer.step_hook = step
        trainer.run()
        wall = trainer.timer.wall()  # before the trace is written out
    finally:
        with quiet():
            prof.stop()
    work = trainer.clock.work  # the window's work per phase, in the projection's units
    rows = phase_table(trainer, run_dir, wall)
    table = format_phases(rows, wall)
    cap = cfg.profile.model_epochs if cfg.algorithm.name == "mbpo" else None
    projected, epochs = whole_run(cfg, work, trainer.timer.grand, cap)
    sort_key = "self_cuda_time_total" if trainer.device.type == "cuda" else "self_cpu_time_total"
    ops = prof.key_averages().table(sort_by=sort_key, row_limit=cfg.profile.top_ops)
    window = {
        "env_steps": trainer.env_steps,
        "random_steps": wcfg.algorithm.init_steps,
        "sac_updates": trainer.algo.updates,
        "recorded_from": start,
        "model_fits": work.fits,
        "fit_epochs": [work.first_epochs, *([work.later[1]] if work.later[0] else [])],
        "model_epochs_cap": cap,
    }
    write_atomic(os.path.join(out_dir, "phases.txt"), table + "\n")
    write_atomic(os.path.join(out_dir, "ops.txt"), ops + "\n")
    summary = {
        "wall_seconds": wall,
        "device": str(trainer.device),
        "phases": rows,
        "window": window,
        "projection": {"seconds": projected, "fit_epochs": epochs},
        "compile_warmup_s": {k: c.seconds for k, c in trainer.compiled.items()},
    }
    write_atomic(os.path.join(out_dir, "phases.json"), json.dumps(summary, indent=2) + "\n")
    warm = "".join(f", {k} compiled in {c.seconds or 0:.1f} s" for k, c in trainer.compiled.items())
    print(
        f"\n{window_text(cfg, window)}\ndevice {trainer.device}{warm} (before the window)\n"
        f"{table}\n\n{whole_run_text(cfg, projected, epochs)}\n\n"
        f"top operators by self time (the window):\n{ops}"
    )
    print(
        f"written to {out_dir}: phases.txt, phases.json, ops.txt"
        + (", a torch.profiler trace (*.pt.trace.json)" if cfg.profile.trace else "")
    )
    return {"phases": rows, "wall": wall, "projection": projected}


def window_text(cfg: Config, window: dict[str, Any]) -> str:
    """What the window ran, and what was capped: its shares are not a run's."""
    text = (
        f"profiling window: {window['env_steps']:,} env steps ({window['random_steps']:,} random),"
        f" {window['sac_updates']:,} SAC updates"
    )
    epochs = [f"{e:.0f}" for e in window["fit_epochs"] if e is not None]
    if cfg.algorithm.name == "mbpo" and epochs:
        cap, own = window["model_epochs_cap"], cfg.model.max_epochs
        how = "to its early stop" if own is None else f"to its early stop or model.max_epochs={own}"
        how = how if cap is None else f"capped at {cap} (profile.model_epochs)"
        text += (
            f", {window['model_fits']} model fits of {' and '.join(epochs)} epochs (the first "
            f"from random weights, the next from it, as a run's later fits; each {how})"
        )
    text += f"; the profiler recorded from env step {window['recorded_from']:,} on"
    return text + ". Its shares below are the window's, not a run's: see the projection."


@contextlib.contextmanager
def without_kineto_lines(write: Callable[[str], None]) -> Iterator[None]:
    """Hold back the profiler's C++ log lines, written to file descriptor 2 across the
    progress bar; anything else written meanwhile is passed on through ``write``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for line in held.read().decode(errors="replace").splitlines():
                if line.strip() and not KINETO_LINE.match(line):
                    write(line)
