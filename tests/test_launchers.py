"""Parallel sweeps through hydra's launcher plugins (the ``launchers`` extra): a 2-job multirun
with joblib (local worker processes) and with submitit_local (submitit's local executor, no
SLURM), each job in its own run folder and its own process."""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
import yaml
from test_cli import _run

# SAC on Pendulum, a few seconds per job: one evaluation, at the last step.
SWEEP = [
    "algorithm=sac",
    "env=pendulum",
    "total_steps=300",
    "algorithm.init_steps=100",
    "agent.hidden_sizes=[32,32]",
    "agent.batch_size=32",
    "eval.every=300",
    "eval.episodes=1",
    "logger.progress=false",
    "logger.tensorboard=false",
    "device=cpu",
    "seed=0,1",
]


def _multirun(
    train_cmd: list[str], tmp_path: str, launcher: list[str], sweep_args: list[str] = SWEEP
) -> tuple[str, str]:
    """The sweep folder, and what the command printed on stderr."""
    sweep = os.path.join(tmp_path, "sweep")
    args = [*train_cmd, "-m", *launcher, *sweep_args, f"hydra.sweep.dir={sweep}"]
    proc = _run(args, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not os.path.exists(os.path.join(tmp_path, "runs"))  # all under the sweep folder
    return sweep, proc.stderr


def _check_jobs(sweep: str, printed: str) -> list[int]:
    """Each job's run folder holds its final evaluation and its own seed, and no ``.lock``
    once it ended; returns the pids of the processes that ran the jobs (each start block
    names its run folder and process, in ``printed``)."""
    jobs = sorted(glob.glob(os.path.join(sweep, "[0-9]_*")))
    assert [os.path.basename(j)[:2] for j in jobs] == ["0_", "1_"], jobs
    pids = []
    for seed, job in enumerate(jobs):
        with open(os.path.join(job, "metrics.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        assert max(r["step"] for r in rows) == 300
        assert any(r["step"] == 300 and "eval/return_mean" in r for r in rows), rows[-1]
        with open(os.path.join(job, "config.yaml"), encoding="utf-8") as f:
            assert yaml.safe_load(f)["seed"] == seed
        assert not os.path.exists(os.path.join(job, ".lock"))
        (pid,) = re.findall(rf"run folder +{re.escape(job)} \(process (\d+)\)", printed)
        pids.append(int(pid))
    return pids


def test_joblib_sweep_runs_each_job_in_its_own_process(train_cmd: list[str], tmp_path: str) -> None:
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep, printed = _multirun(
        train_cmd, tmp_path, ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    )
    pids = _check_jobs(sweep, printed)
    assert pids[0] != pids[1]  # two loky workers, not one process running both jobs


def test_joblib_jobs_print_a_line_per_evaluation_in_place_of_a_shared_bar(
    train_cmd: list[str], tmp_path: str
) -> None:
    """Side by side, each job's bar would redraw the same terminal line: with the bar on,
    a parallel job prints a line per evaluation, named by its number and swept value. Run
    again into the same sweep folder, each job is refused."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    args = [a for a in SWEEP if a != "logger.progress=false"] + ["eval.every=150"]
    sweep, printed = _multirun(train_cmd, tmp_path, ["hydra/launcher=joblib"], args)
    for seed in (0, 1):
        job = f"job {seed} (seed={seed}): step "
        lines = [line for line in printed.splitlines() if line.startswith(job)]
        assert [line[len(job) :].split(",")[0] for line in lines] == ["150/300", "300/300"]
        assert "left" not in lines[1], lines  # (none at the last step)
    assert "explore:" not in printed and "train:" not in printed  # no bar drawn
    # The same sweep again into the same sweep folder: each job's folder holds a run, which
    # a new run would mix with its own, so each job is refused and writes nothing (hydra's
    # record of the job, .hydra/, included).
    before = {p: os.path.getsize(p) for p in glob.glob(os.path.join(sweep, "*", "metrics.jsonl"))}
    records = glob.glob(os.path.join(sweep, "*", ".hydra", "*"))  # (hydra's record of each job)
    stamps = {p: os.stat(p).st_mtime_ns for p in records}
    again = [*train_cmd, "-m", "hydra/launcher=joblib", *args, f"hydra.sweep.dir={sweep}"]
    proc = _run(again, cwd=str(tmp_path))
    assert proc.returncode == 2 and "error: the job's folder " in proc.stderr, proc.stderr[-2000:]
    assert "holds a run (ckpt/last.pt)" in proc.stderr
    assert {p: os.path.getsize(p) for p in before} == before and len(before) == 2
    assert glob.glob(os.path.join(sweep, "*", ".hydra", "*")) == records and len(records) == 6
    assert {p: os.stat(p).st_mtime_ns for p in records} == stamps


def test_submitit_local_sweep_runs_each_job_in_its_own_process(
    train_cmd: list[str], tmp_path: str
) -> None:
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    launcher = ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=5"]
    sweep, _ = _multirun(train_cmd, tmp_path, launcher)
    # submitit's own job files (pickles, stdout/stderr) stay in the sweep folder.
    logs = glob.glob(os.path.join(sweep, ".submitit", "*", "*_log.err"))
    assert len(logs) == 2, logs
    printed = ""
    for log in logs:
        with open(log, encoding="utf-8") as f:
            printed += f.read()
    pids = _check_jobs(sweep, printed)
    assert pids[0] != pids[1]


def test_a_bad_value_stops_a_joblib_sweep_before_any_folder(
    train_cmd: list[str], tmp_path: str
) -> None:
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    sweep = os.path.join(tmp_path, "sweep")
    args = ["-m", "hydra/launcher=joblib", *SWEEP, "total_steps=-5", f"hydra.sweep.dir={sweep}"]
    proc = _run([*train_cmd, *args], cwd=str(tmp_path))  # ValidateCallback.on_multirun_start
    assert proc.returncode == 2
    assert "total_steps=-5 is not allowed" in proc.stderr, proc.stderr[-3000:]
    assert not os.path.exists(sweep)
