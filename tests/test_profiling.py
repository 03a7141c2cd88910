"""Profiling mode: a short window of the real loop, then the phase table, the operator table
and a trace file (chrome trace JSON with traceEvents)."""

from __future__ import annotations

import glob
import json
import os

from test_cli import TINY, run_started


def test_profile_window_writes_tables_and_trace(train_cmd: list[str], tmp_path: str) -> None:
    """In its own folder, runs/profile/<env>/<date>; no resume command (a window is not a run
    to go on with); none of the profiler's C++ log lines across the bar; its two model fits
    (here at the run's own cap, model.max_epochs=2) and what it recorded."""
    # (init_steps: one 200-step Pendulum episode, so the window's model phase has real rows)
    args = [a for a in TINY if not a.startswith(("total_steps", "algorithm.init_steps"))]
    args.append("algorithm.init_steps=200")
    cmd = [*train_cmd, *args, "profile=true", "profile.updates=20"]
    proc = run_started(cmd, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = glob.glob(os.path.join(tmp_path, "runs", "profile", "pendulum", "*"))
    assert not glob.glob(os.path.join(tmp_path, "runs", "pendulum"))
    assert "resume=" not in proc.stderr and "estimated time to finish" not in proc.stderr
    assert "profiler_start" not in proc.stderr and "USDT:" not in proc.stderr
    assert "profiling window" in proc.stdout and "top operators by self time" in proc.stdout
    assert "2 model fits of 2 and 2 epochs" in proc.stdout and "model.max_epochs=2" in proc.stdout
    assert "the profiler recorded from env step 300 on" in proc.stdout  # the second fit's
    assert "a whole run of this config (15,000 env steps)" in proc.stdout
    # compile=auto decides for the whole run, and the window's start block says so
    assert "  compile      off (auto, for the whole run the window profiles: " in proc.stderr
    prof = os.path.join(run_dir, "log", "profile")
    with open(os.path.join(prof, "phases.json"), encoding="utf-8") as f:
        phases = json.load(f)
    by_name = {p["phase"]: p for p in phases["phases"]}
    for name in ("env", "model", "rollout", "sac", "eval", "log", "checkpoint", "other"):
        assert name in by_name, name
    for name in ("env", "model", "rollout", "sac", "eval"):
        assert by_name[name]["seconds"] > 0 and by_name[name]["rate"] > 0, name
    assert abs(sum(p["share"] for p in phases["phases"]) - 1.0) < 1e-6
    assert phases["window"]["sac_updates"] == 120  # from step 200: 100, then 20 recorded
    assert phases["window"]["model_fits"] == 2 and phases["window"]["fit_epochs"] == [2, 2]
    projected = phases["projection"]["seconds"]
    assert set(projected) == {"env", "sac", "eval", "checkpoint", "model", "rollout"}
    assert all(seconds > 0 for seconds in projected.values())
    with open(os.path.join(prof, "phases.txt"), encoding="utf-8") as f:
        assert "updates/s" in f.read()
    with open(os.path.join(prof, "ops.txt"), encoding="utf-8") as f:
        assert "Self CPU" in f.read()
    (trace,) = glob.glob(os.path.join(prof, "*.pt.trace.json"))
    with open(trace, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    assert any(e.get("cat") == "cpu_op" for e in events)

    # A window on a resumed run is refused before anything is written (its own steps,
    # evaluations and checkpoints would replace the run's config.yaml and last.pt).
    files = [p for p in glob.glob(os.path.join(run_dir, "**"), recursive=True) if os.path.isfile(p)]
    before = {p: os.path.getmtime(p) for p in files}
    proc = run_started([*train_cmd, f"resume={run_dir}", "profile=true"], timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: profile=true with resume=") and "runs/profile/" in lines[0]
    assert {p: os.path.getmtime(p) for p in before} == before
