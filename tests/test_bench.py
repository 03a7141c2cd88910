"""The benchmark functions run and report sane numbers (speed itself is never asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import torch

from mbrl.bench import loop_bench, scale_bench, seed_bench, update_bench
from mbrl.bench import micro as bench
from mbrl.config import Config

EAGER = {"amp": "off", "compile": False}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_functions_report_positive_rates() -> None:
    b = bench.Bench(torch.device("cpu"), repeats=1, warmup=0)
    sac = update_bench.sac_updates(b, {"eager": EAGER}, batch_size=32, updates=2)["eager"]
    # One update: critic fwd (online + target) + bwd, actor fwd + bwd through the critic.
    # 256x256 hidden layers at batch 32 put it well above 30 MFLOP and below 300 MFLOP.
    assert 3e7 < sac["flops_per_update"] < 3e8 and sac["updates_per_s"] > 0
    assert 0 < sac["share_of_gemm"] < 2
    fits = update_bench.model_fits(b, {"g": {**EAGER, "model": "gaussian"}}, rows=300)
    assert fits["g"]["samples_per_s"] > 0
    assert bench.model_rollout(b, "flow", batch=500) > 0
    assert all(v > 0 for v in bench.buffer_rates(b).values())
    assert bench.env_steps(b, steps=50) > 0
    assert bench.gemm_flops(b, 64) > 0
    assert bench.staging(b, pinned=True, rows=20) > 0
    assert bench.acting_loop(b, "cpu", steps=2, updates=1) > 0


def test_settings_and_an_older_checkout_are_timed_side_by_side() -> None:
    """Eager and compiled blocks, and a checkout's default in a worker process (this
    checkout itself stands in for the older one) in the same rounds."""
    b = bench.Bench(torch.device("cpu"), repeats=1, warmup=0)
    variants = {"eager": EAGER, "compiled": {"amp": "off", "compile": True}}
    rows = update_bench.sac_updates(b, variants, batch_size=32, updates=1, reference=ROOT)
    assert set(rows) == {"eager", "compiled", "reference"}
    assert rows["eager"]["time_vs_first"] == 1.0 and rows["reference"]["updates_per_s"] > 0
    assert rows["compiled"]["warmup_s"] > 0 and rows["eager"]["warmup_s"] == 0
    # The same losses: compiling changes no matmul.
    assert rows["eager"]["flops_per_update"] == rows["compiled"]["flops_per_update"]
    fits = update_bench.model_fits(
        b, {"flow": {**EAGER, "model": "flow"}}, rows=200, reference=ROOT
    )
    assert set(fits) == {"flow", "reference, flow"}
    assert all(r["samples_per_s"] > 0 for r in fits.values())


def test_a_folder_that_is_no_checkout_is_refused_as_reference(tmp_path: str) -> None:
    with pytest.raises(ValueError, match="is not a FlowMBPO checkout"):
        update_bench.ReferenceWorker(str(tmp_path), torch.device("cpu"))


def test_loop_settings_apply_to_the_config() -> None:
    cfg = Config()
    loop_bench.apply_settings(cfg, loop_bench.LOOP_SETTINGS)
    assert cfg.rollout.batch_size == 20_000 and cfg.algorithm.name == "mbpo"
    assert cfg.checkpoint.snapshots is False and cfg.total_steps == 1000


def test_loop_speed_refuses_a_folder_that_is_no_checkout(tmp_path: str) -> None:
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "loop_speed.py"), str(tmp_path), ROOT],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "is not a FlowMBPO checkout" in proc.stderr


def _bench_script(tmp_path: str, *args: str) -> tuple[dict[str, Any], str]:
    """scripts/bench.py run with ``args``: its JSON and its printed table."""
    out, script = os.path.join(tmp_path, "bench.json"), os.path.join(ROOT, "scripts", "bench.py")
    proc = subprocess.run(
        [sys.executable, script, *args, "--json", out], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    with open(out, encoding="utf-8") as f:
        return json.load(f), proc.stdout


def test_bench_script_sac_only_writes_the_sac_rows(tmp_path: str) -> None:
    res, stdout = _bench_script(tmp_path, "--sac-only", "--skip-compile", "--repeats", "1")
    assert set(res["sac"]) == {"eager, amp=off", "eager, amp=bf16"}
    assert "model_fit_samples_per_s" not in res and "whole_loop" not in res
    assert "% of GEMM" in stdout and "x the first row's time" in stdout
    assert "seed_batch" not in res  # (only with --seed-batch)


def test_seed_batch_rows_time_solo_blocks_against_one_batched_block() -> None:
    """scripts/bench.py --seed-batch 2's rows: per seed and together, and what ran."""
    row = seed_bench.seed_batches(bench.Bench(torch.device("cpu"), repeats=1), [2], 32, 2)["S=2"]
    assert row["ran"] == row["ran_solo"] == "eager" and row["time_vs_solo"] > 0
    per_seed, together = row["batched_updates_per_s_per_seed"], row["batched_updates_per_s_all"]
    assert per_seed > 0 and together == pytest.approx(2 * per_seed)
    assert row["solo_updates_per_s_all"] == pytest.approx(2 * row["solo_updates_per_s_per_seed"])


def test_seed_batch_fit_rows_time_solo_fits_against_one_batched_fit() -> None:
    """scripts/bench.py --seed-batch 2's model-fit rows: per seed and together, what ran."""
    b = bench.Bench(torch.device("cpu"), repeats=1)
    row = seed_bench.fit_batches(b, [2], "gaussian", rows=300, epochs=1)["S=2"]
    assert row["ran"] == row["ran_solo"] == "eager" and row["time_vs_solo"] > 0
    per_seed, together = row["batched_steps_per_s_per_seed"], row["batched_steps_per_s_all"]
    assert per_seed > 0 and together == pytest.approx(2 * per_seed)


def test_eval_rows_time_sequential_and_vector_evaluation() -> None:
    rows = scale_bench.bench_eval(episodes=2, repeats=1, max_episode_steps=20)
    assert [r["name"] for r in rows] == ["sequential", "vector sync", "vector async"]
    assert rows[0]["speedup"] == 1.0 and all(r["median_s"] > 0 for r in rows)
    # The fixed fresh actor keeps Hopper up for 68+ steps: every row's episodes are truncated.
    assert all(r["episode_length_mean"] == r["episode_length_max"] == 20 for r in rows)


def test_bench_script_eval_only_writes_the_eval_rows(tmp_path: str) -> None:
    args = ["--eval-only", "--repeats", "1", "--eval-episodes", "2", "--eval-max-steps", "10"]
    res, stdout = _bench_script(tmp_path, *args)
    assert [r["name"] for r in res["eval"]] == ["sequential", "vector sync", "vector async"]
    assert "sac" not in res and "gemm_flop_per_s" not in res
    assert "x sequential" in stdout


def test_sampling_rows_count_env_steps_of_every_copy() -> None:
    rows = scale_bench.bench_sampling(
        counts=(1, 2), modes=("sync",), env_steps=40, updates_per_step=1
    )
    assert [r["name"] for r in rows] == ["num_envs=1 sync", "num_envs=2 sync"]
    assert rows[0]["collect_speedup"] == 1.0
    assert all(r["collect_steps_per_s"] > 0 and r["sac_steps_per_s"] > 0 for r in rows)
