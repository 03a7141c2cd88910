"""scripts/eta_check.py: a run's estimate replayed from its metrics (mbrl/tools/eta_replay.py)
and set against the wall-clock time the run then took, on recorded runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest
from test_eta import CPU_BUNDLE, GPU_BUNDLE, _recorded

from mbrl.tools.eta_replay import clock_at, first_estimate, wall_check

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
SCRIPT = os.path.join(ROOT, "scripts", "eta_check.py")


def test_the_estimate_holds_against_the_wall_clock_of_a_recorded_gpu_run(tmp_path: str) -> None:
    """H200 flow seed 1 (ten runs sharing the GPU, one process each): from the first step its
    estimate was ready, the time it projected to each later log step against the wall-clock
    time the run took, within 25 % at the last one; took is the logs' own clock."""
    cfg, rows = _recorded(GPU_BUNDLE, "model-flow/seed_1", str(tmp_path))
    at = first_estimate(cfg, rows)
    assert at == 6000  # (the first fit at 5000, the second at 5250, then 100 updates and more)
    assert not clock_at(cfg, rows, 5000)[0].ready(5000)
    points = wall_check(cfg, rows, at)
    logs = {r["step"]: r["time"] for r in rows if "time/wall" in r}
    assert [p.step for p in points] == [s for s in sorted(logs) if s > at]
    assert all(p.took == pytest.approx(logs[p.step] - logs[at]) for p in points)
    assert abs(points[-1].projected / points[-1].took - 1) < 0.25


def test_a_resume_ends_the_check(tmp_path: str) -> None:
    """CPU flow seed 0 was stopped and resumed after each of its later log steps: the process
    that made the estimate at 6000 logged nothing after it, so nothing is compared."""
    cfg, rows = _recorded(CPU_BUNDLE, "model-flow/seed_0", str(tmp_path))
    assert wall_check(cfg, rows, 6000) == []


def test_the_script_prints_the_check_and_refuses_a_folder_without_a_run(tmp_path: str) -> None:
    with tarfile.open(GPU_BUNDLE) as tar:
        names = [f"runs/model-gaussian/seed_0/{n}" for n in ("config.yaml", "metrics.jsonl")]
        tar.extractall(str(tmp_path), members=[tar.getmember(n) for n in names], filter="data")
    run = os.path.join(tmp_path, "runs", "model-gaussian", "seed_0")
    out = subprocess.run(
        [sys.executable, SCRIPT, run, "--rows", "2"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0].startswith("estimate at step 6,000: about ") and "to step 125,000" in out[0]
    assert out[1].split() == ["step", "took", "projected", "diff"] and len(out) <= 2 + 3
    assert out[-1].split()[0] == "9,000"  # (the last log step the process reached)
    empty = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2 and "no config.yaml" in empty.stderr
