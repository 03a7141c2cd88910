"""scripts/gpu_check.py, the first command on a GPU machine, run here on the CPU with its
quickest step: it runs each step under its limit and writes the three files the device tool
brings back (at most 8 may come back), with the step's outcome and figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.py")


def test_the_check_runs_its_steps_and_writes_a_summary(tmp_path: str) -> None:
    out = os.path.join(tmp_path, "out")
    cmd = [sys.executable, SCRIPT, "--device", "cpu", "--steps", "tests", "--out", out]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(os.listdir(out)) == ["steps.log", "summary.json", "summary.txt"]
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["steps"]["tests"]["outcome"] == "ok"
    # On a CPU every CUDA test is skipped, and none fails.
    assert summary["tests"]["failed"] == 0 and summary["tests"]["skipped"] > 0
    text = proc.stdout
    assert "step tests    ok" in text and ", 0 failed, " in text


def test_unknown_steps_and_a_missing_gpu_are_refused(tmp_path: str) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--device", "cpu", "--steps", "tests,fly", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "unknown step(s) ['fly']" in proc.stderr
    assert not os.listdir(tmp_path)
