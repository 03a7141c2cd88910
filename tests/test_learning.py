"""Learning checks (slow: minutes on a CPU). Run with ``pytest -m slow``."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


@pytest.mark.slow
def test_sac_solves_pendulum(train_cmd: list[str], tmp_path: str) -> None:
    """The README's claim: SAC reaches eval/return_mean >= -250 on Pendulum in 15k steps."""
    run_dir = os.path.join(tmp_path, "run")
    args = [
        "env=pendulum",
        "algorithm=sac",
        "total_steps=15000",
        "seed=0",
        "device=cpu",
        "logger.progress=false",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.run([*train_cmd, *args], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        evals = [r for r in map(json.loads, f) if "eval/return_mean" in r]
    assert evals[-1]["step"] == 15000
    assert evals[-1]["eval/return_mean"] >= -250, evals[-1]
