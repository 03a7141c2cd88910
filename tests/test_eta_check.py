"""scripts/eta_check.py: a run's estimate replayed from its metrics (mbrl/tools/eta_replay.py)
and set against the wall-clock time the run then took, on recorded runs."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest
from test_eta import CPU_BUNDLE, GPU_BUNDLE, _recorded

from mbrl.runtime.timer import CARRIED, resumed_between
from mbrl.tools.eta_replay import clock_at, first_estimate, wall_check, whole_intervals

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


def test_a_pause_is_left_out_of_the_time_the_run_took(tmp_path: str) -> None:
    """The same recorded run as if it had stood stopped 100 s (Ctrl-Z) in its second interval
    past 6000 (its logs 100 s later from there, that interval's ``time/paused``): the check
    goes on past the pause and says what the unpaused run says."""
    cfg, rows = _recorded(GPU_BUNDLE, "model-flow/seed_1", str(tmp_path))
    logs = sorted({r["step"] for r in rows if "time/wall" in r and r["step"] > 6000})
    paused_at = logs[1]
    moved = [
        {**r, "time": r["time"] + 100.0} if r["step"] >= paused_at and "time" in r else r
        for r in rows
    ]
    moved = [{**r, "time/paused": 100.0} if r["step"] == paused_at and "time/wall" in r else r
             for r in moved]  # fmt: skip
    assert wall_check(cfg, moved, 6000) == wall_check(cfg, rows, 6000)
    steps = [[r["step"] for r in whole_intervals(x, 6000)] for x in (moved, rows)]
    assert steps[0] == steps[1] and paused_at in steps[0]


def test_a_resume_ends_the_check(tmp_path: str) -> None:
    """CPU flow seed 0 was stopped and resumed after each of its later log steps: the process
    that made the estimate at 6000 logged nothing after it, so nothing is compared."""
    cfg, rows = _recorded(CPU_BUNDLE, "model-flow/seed_0", str(tmp_path))
    assert wall_check(cfg, rows, 6000) == []


def test_a_resume_that_says_so_ends_the_check_without_a_gap(tmp_path: str) -> None:
    """The recorded GPU run as if resumed at once at its second log step past 6000, its line
    carrying the stopped process's seconds (no gap in the stamps to tell it by): the check
    stops before that line, and whole_intervals leaves it out."""
    cfg, rows = _recorded(GPU_BUNDLE, "model-flow/seed_1", str(tmp_path))
    logs = sorted({r["step"] for r in rows if "time/wall" in r and r["step"] > 6000})
    at = logs[1]
    resumed = [{**r, CARRIED: 3.0} if r["step"] == at and "time/wall" in r else r for r in rows]
    assert [p.step for p in wall_check(cfg, rows, 6000)][:2] == logs[:2]
    assert [p.step for p in wall_check(cfg, resumed, 6000)] == logs[:1]
    assert at not in [r["step"] for r in whole_intervals(resumed, 6000)]
    assert at in [r["step"] for r in whole_intervals(rows, 6000)]


def test_one_rule_tells_a_resume_from_the_line_before() -> None:
    """The rule the time-left check and seeds.py's rates share: a line that carries seconds is
    a resume, whatever its stamp; without the key, a gap (less the pause) past the interval's
    wall-clock seconds by more than 5 % + 5 s."""
    a = {"time": 1000.0, "time/wall": 60.0}
    same = {"time": 1064.0, "time/wall": 60.0}  # (4 s of logging between stamps)
    assert not resumed_between(a, same)
    assert resumed_between(a, {**same, CARRIED: 0.5})
    assert resumed_between(a, {**same, "time": 1069.5})  # (60 * 1.05 + 5 = 68 s < 69.5)
    assert not resumed_between(a, {**same, "time": 1069.5, "time/paused": 30.0})


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
    at = [sys.executable, SCRIPT, run, "--at", "6250"]
    off = subprocess.run(at, capture_output=True, text=True)
    said = f"error: --at 6,250 is not one of {run}'s log steps: 1,000, 2,000, "
    assert off.returncode == 2 and off.stderr.startswith(said), off.stderr
    # a log step before the run's estimate was ready (the random steps): one line, no traceback
    early = subprocess.run([*at[:-1], "5000"], capture_output=True, text=True)
    said = "error: --at 5,000: the run had no estimate yet there (it waits for every phase"
    assert early.returncode == 2 and early.stderr.startswith(said), early.stderr
    assert (
        early.stderr.rstrip().endswith("its first: 6,000") and len(early.stderr.splitlines()) == 1
    )
