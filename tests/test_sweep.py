"""The wandb sweep file: a run built from it as the wandb agent builds it uses the swept value."""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

import pytest
import yaml
from test_cli import TINY, _run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWEEP = os.path.join(ROOT, "sweeps", "rollout_length.yaml")


def agent_commands(spec: dict[str, Any]) -> list[list[str]]:
    """Every command of a grid sweep, with the agent's macros expanded."""
    params = spec["parameters"]
    keys = list(params)
    grids = [params[k]["values"] if "values" in params[k] else [params[k]["value"]] for k in keys]
    commands = []
    for combo in itertools.product(*grids):
        args = [f"{k}={_hydra(v)}" for k, v in zip(keys, combo, strict=True)]
        macros = {
            "${env}": ["/usr/bin/env"],
            "${interpreter}": [sys.executable],
            "${program}": [spec["program"]],
            "${args_no_hyphens}": args,
        }
        commands.append([part for item in spec["command"] for part in macros.get(item, [item])])
    return commands


def _hydra(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_sweep_file_is_a_valid_grid_over_rollout_length() -> None:
    with open(SWEEP, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    assert spec["method"] == "grid" and spec["metric"] == {
        "name": "eval/return_mean",
        "goal": "maximize",
    }
    assert spec["parameters"]["rollout.max_length"]["values"] == [1, 5, 10, 15]
    commands = agent_commands(spec)
    assert len(commands) == 4 * 3
    assert commands[0][:3] == ["/usr/bin/env", sys.executable, "scripts/train.py"]


def test_a_sweep_command_runs_with_its_rollout_length(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(SWEEP, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    cmd = next(c for c in agent_commands(spec) if "rollout.max_length=5" in c)
    run_dir = os.path.join(tmp_path, "run")
    # The sweep's own command, shrunk to seconds by extra overrides (hydra takes them anywhere).
    tiny = [a for a in TINY if not a.startswith(("env=", "total_steps"))]
    extra = [
        *tiny,
        "total_steps=250",
        "mbpo.epoch_length=100",  # the phase at step 200 is in epoch 1 (after init_steps=100)
        "rollout.min_epoch=0",
        "rollout.max_epoch=0",
        f"hydra.run.dir={run_dir}",
    ]
    monkeypatch.setenv("WANDB_MODE", "offline")  # the sweep logs to wandb; no account here
    proc = _run([*cmd, *extra], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    assert config["rollout"]["max_length"] == 5 and config["env"]["name"] == "hopper"
    assert config["logger"]["wandb"] is True
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        assert '"rollout/length": 5' in f.read()
