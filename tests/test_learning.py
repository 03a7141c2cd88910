"""Learning checks (slow: minutes on a CPU). Run with ``pytest -m slow``."""

from __future__ import annotations

import json
import os

import pytest
from test_cli import run_started


def _final_eval(train_cmd: list[str], run_dir: str, *args: str) -> dict[str, float]:
    cmd = [
        *train_cmd,
        *args,
        "seed=0",
        "device=cpu",
        "logger.progress=false",
        f"hydra.run.dir={run_dir}",
    ]
    proc = run_started(cmd, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        evals = [r for r in map(json.loads, f) if "eval/return_mean" in r]
    return evals[-1]


@pytest.mark.slow
def test_sac_solves_pendulum(train_cmd: list[str], tmp_path: str) -> None:
    """The README's claim: SAC reaches eval/return_mean >= -250 on Pendulum in 15k steps."""
    last = _final_eval(
        train_cmd, str(tmp_path), "env=pendulum", "algorithm=sac", "total_steps=15000"
    )
    assert last["step"] == 15000 and last["eval/return_mean"] >= -250, last


@pytest.mark.slow
def test_mbpo_flow_solves_pendulum_in_5k_steps(train_cmd: list[str], tmp_path: str) -> None:
    """MBPO with the flow world model (the defaults) on Pendulum: >= -250 after 5000 steps."""
    last = _final_eval(train_cmd, str(tmp_path), "env=pendulum", "total_steps=5000")
    assert last["step"] == 5000 and last["eval/return_mean"] >= -250, last


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gaussian", "deterministic"])
def test_mbpo_other_models_solve_pendulum_in_5k_steps(
    train_cmd: list[str], tmp_path: str, model: str
) -> None:
    """MBPO's Gaussian ensemble and the deterministic ensemble learn as the flow does."""
    last = _final_eval(
        train_cmd, str(tmp_path), "env=pendulum", f"model={model}", "total_steps=5000"
    )
    assert last["step"] == 5000 and last["eval/return_mean"] >= -250, last
