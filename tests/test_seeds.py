"""scripts/seeds.py as a user runs it: seeds x variants as processes, its report checked
against the runs' own metrics.jsonl, a rerun that continues instead of restarting, a budget
that stops every run with a checkpoint."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_cli import run_started

from mbrl.runtime import checkpoint
from mbrl.tools.plotting import read_metrics
from mbrl.tools.seed_args import overridden, parse_duration, parse_seeds, variants, whole_number
from mbrl.tools.seed_runs import Batch, Job, Variant, batches, stages, stop_line
from mbrl.tools.seed_tables import stands_still

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "env=pendulum", "algorithm=sac", "algorithm.init_steps=100", "algorithm.updates_per_step=1",
    "agent.hidden_sizes=[16,16]", "agent.batch_size=32", "eval.every=100", "eval.episodes=2",
    "compile=false", "logger.tensorboard=false",
]  # fmt: skip


def seeds(
    out: str, *args: str, timeout: float = 300, again: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), out, *args, "--", *TINY]
    return run_started(cmd, again, timeout=timeout, cwd=ROOT)


def _evals(run: str) -> dict[int, float]:
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {r["step"]: r["eval/return_mean"] for r in rows if "eval/return_mean" in r}


def test_report_matches_the_runs_and_a_rerun_continues(tmp_path: str) -> None:
    out = os.path.join(tmp_path, "camp")
    args = ["--seeds", "0-1", "--vary", "agent.init=glorot,torch", "--procs", "2"]
    first = seeds(out, *args, "--steps", "200")
    assert first.returncode == 0, first.stderr
    runs = {
        (init, s): os.path.join(out, "runs", f"agent.init-{init}", f"seed_{s}")
        for init in ("glorot", "torch")
        for s in (0, 1)
    }
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        report = json.load(f)["variants"]
    for init in ("glorot", "torch"):
        per_seed = [_evals(runs[init, s]) for s in (0, 1)]
        assert [sorted(e) for e in per_seed] == [[100, 200]] * 2
        for step in (100, 200):
            values = [e[step] for e in per_seed]
            cell = report[f"agent.init={init}"][str(step)]
            assert cell["n"] == 2 and "still" not in cell  # (Pendulum never stands still)
            assert cell["mean"] == pytest.approx(np.mean(values))
            assert cell["std"] == pytest.approx(np.std(values, ddof=1))
            assert (cell["low"], cell["high"]) == (None, None)  # (two seeds: no interval)
    with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
        table = f.read()
    assert "| env steps | agent.init=glorot | agent.init=torch |" in table
    assert "agent.init=torch − agent.init=glorot" in table  # (the paired table)
    assert "full-length" not in table and "still" not in table  # (Pendulum cannot stand still)
    assert "published column" not in table  # (no --reference: no such column)
    assert "invocation 1: 2 processes on cpu, 4 runs," in table
    for name in ("curves.png", "curves.svg", "metrics.tar.gz"):
        assert os.path.getsize(os.path.join(out, name)) > 0

    # the same command for one of the runs, further: it continues (the others stay as they are)
    before = {k: _evals(p) for k, p in runs.items()}
    path = runs["torch", 1]  # killed past its checkpoint: it logged a step it cannot resume at
    with open(os.path.join(path, "metrics.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"step": 250, "time": time.time(), "learner/q_loss": 1.0}) + "\n")
    job = Job(Variant(("agent.init=torch",)), 1, path)
    assert (job.steps(), job.logged()) == (200, 250)
    history = os.path.join(out, "invocations.json")  # (as if the first ran at another commit)
    with open(history, encoding="utf-8") as f:
        invocations = json.load(f)
    invocations[0]["commit"] = "abc1234"
    with open(history, "w", encoding="utf-8") as f:
        json.dump(invocations, f)
    one = ["--seeds", "1", "--vary", "agent.init=torch"]
    again = seeds(out, *one, "--steps", "300")
    assert again.returncode == 0, again.stderr
    with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
        assert "; its invocations ran at 2 commits, abc1234, " in f.read()  # (said in its header)
    assert "agent.init-torch/seed_1 continues at step 200 -> 300" in again.stderr, again.stderr
    after = _evals(path)
    rows = read_metrics(os.path.join(path, "metrics.jsonl"))
    assert not any(r.get("learner/q_loss") == 1.0 for r in rows)  # (the resume dropped it)
    assert sorted(after) == [100, 200, 300]
    assert {s: after[s] for s in (100, 200)} == before["torch", 1]  # continued, not restarted
    assert any(d.startswith("resume_") for d in os.listdir(os.path.join(path, ".hydra")))
    assert all(_evals(p) == before[k] for k, p in runs.items() if k != ("torch", 1))
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        cells = json.load(f)["variants"]["agent.init=torch"]
    assert cells["300"]["n"] == 1 and cells["200"]["n"] == 2
    done = seeds(out, *one, "--steps", "300")  # nothing left to do
    assert done.returncode == 0 and "starts" not in done.stderr and "continues" not in done.stderr
    # --report-only given nothing else: the campaign's overrides, variants and seeds
    bare = os.path.join(tmp_path, "bare")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), out]
    res = subprocess.run([*cmd, "--report-only", "--report", bare], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0 and "(4 runs)" in res.stderr, res.stderr
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        whole = json.load(f)["variants"]
    with open(os.path.join(bare, "summary.json"), encoding="utf-8") as f:
        assert json.load(f)["variants"] == whole
    # a variant the campaign does not have: refused, the report there left as it was
    other = ["--variant", "agent.init=torch agent.batch_size=16"]
    res = subprocess.run([*cmd, "--report-only", "--report", bare, *other], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)  # fmt: skip
    said = f"error: --report-only: agent.init=torch agent.batch_size=16: no such variant in {out}"
    assert res.returncode == 2 and res.stderr.startswith(said), res.stderr
    assert len(res.stderr.splitlines()) == 1
    with open(os.path.join(bare, "summary.json"), encoding="utf-8") as f:
        assert json.load(f)["variants"] == whole

    # A campaign of one variant: its bundle holds runs/<variant>/seed_<N>/ as the folder does
    solo, one_report = os.path.join(tmp_path, "solo"), os.path.join(tmp_path, "one")
    torch_runs = os.path.join("runs", "agent.init-torch")
    shutil.copytree(os.path.join(out, torch_runs), os.path.join(solo, torch_runs))
    res = seeds(solo, "--seeds", "0-1", "--vary", "agent.init=torch", "--report-only",
                "--report", one_report)  # fmt: skip
    assert res.returncode == 0 and "(2 runs)" in res.stderr, res.stderr
    with tarfile.open(os.path.join(one_report, "metrics.tar.gz")) as tar:
        names = tar.getnames()
    assert "runs/agent.init-torch/seed_1/metrics.jsonl" in names
    assert all(n.startswith("runs/agent.init-torch/seed_") for n in names), names
    # the report's header gives its command as typed: run again, it finds the same runs (a
    # variant of two overrides is one quoted argument; unquoted, its second became common)
    two = os.path.join(tmp_path, "two")
    shutil.copytree(
        os.path.join(out, torch_runs),
        os.path.join(two, "runs", "agent.init-torch_logger.progress-false"),
    )
    res = seeds(
        two,
        "--seeds",
        "0-1",
        "--variant",
        "agent.init=torch logger.progress=false",
        "--report-only",
    )
    assert res.returncode == 0 and "(2 runs)" in res.stderr, res.stderr
    with open(os.path.join(two, "summary.md"), encoding="utf-8") as f:
        header = re.search(r"`python scripts/seeds.py (.*)`; last written", f.read())
    assert header is not None
    os.remove(os.path.join(two, "summary.md"))
    again = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "seeds.py"),
                            *shlex.split(header.group(1))], capture_output=True, text=True,
                           timeout=120, cwd=ROOT)  # fmt: skip
    assert again.returncode == 0 and "(2 runs)" in again.stderr, again.stderr
    # a GPU campaign's runs (their metrics bundle) reported on a machine without one
    gpu = os.path.join(tmp_path, "gpu")
    with tarfile.open(os.path.join(out, "metrics.tar.gz")) as tar:
        tar.extractall(gpu, filter="data")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), gpu, *args, "--report-only"]
    res = subprocess.run([*cmd, "--", *TINY, "device=cuda"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)  # fmt: skip
    assert res.returncode == 0, res.stderr
    with open(os.path.join(gpu, "summary.json"), encoding="utf-8") as f:
        assert json.load(f)["variants"]["agent.init=torch"]["300"]["n"] == 1
    assert not os.path.exists(os.path.join(gpu, "logs"))  # (nothing was run)
    # a folder without the runs (a wrong path, or a bundle extracted elsewhere): refused
    empty = os.path.join(tmp_path, "empty")
    bad = [*cmd[:2], empty, *args, "--report-only", "--report", one_report, "--", *TINY]
    res = subprocess.run(bad, capture_output=True, text=True, timeout=120, cwd=ROOT)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "none of the 4 runs" in lines[0], res.stderr
    with tarfile.open(os.path.join(one_report, "metrics.tar.gz")) as tar:
        assert tar.getnames() == names  # (the report there is left as it was)
    assert not os.path.exists(empty)  # (not even a manifest)


@pytest.mark.slow
def test_a_budget_stops_every_run_with_a_checkpoint(tmp_path: str) -> None:
    out = os.path.join(tmp_path, "camp")
    start = time.time()
    args = ["--seeds", "0-2", "--steps", "200000", "--budget", "150s", "--procs", "2"]
    res = seeds(out, *args, "--report-every", "30", again=False)  # (timed, one invocation)
    assert res.returncode == 0, res.stderr
    # where the runs are, every 30 s, and the campaign's time left: past the budget's end
    outlook = re.findall(
        r"running: base/seed_0 at .* · every run at 200,000 in about (.*)", res.stderr
    )
    assert outlook and all("; the budget ends first, at " in line for line in outlook), res.stderr
    assert time.time() - start < 150 + 120  # the budget, and the grace at most
    for s in (0, 1):  # each run was given the budget less a minute to start and stop
        with open(os.path.join(out, "logs", f"base__seed_{s}.log"), encoding="utf-8") as f:
            (given,) = re.findall(r"^\$ .* max_minutes=([0-9.]+)", f.read(), re.MULTILINE)
        assert 1.0 < float(given) <= (150 - 60) / 60
    for s in (0, 1):
        run = os.path.join(out, "runs", "base", f"seed_{s}")
        assert os.path.isfile(os.path.join(run, "ckpt", "last.pt"))
        assert f"base/seed_{s} stopped at step" in res.stderr
    assert "it says" not in res.stderr  # (the runs stopped themselves: nothing to repeat)
    # the third run's turn never came: said, and no folder of it
    assert "budget being spent or under 120 s from its end" in res.stderr, res.stderr
    *_, unstarted, _, again = res.stderr.strip().splitlines()
    assert unstarted.endswith("): base/seed_2"), res.stderr
    assert again.startswith("2 runs short of 200,000 env steps: the same command continues them:")
    assert shlex.split(again.split(": ", 1)[1].split("continues them: ", 1)[1])[2:] == [
        out,
        *args,
        "--report-every",
        "30",
        "--",
        *TINY,
    ]  # (python, seeds.py, then the arguments as given)
    assert not os.path.exists(os.path.join(out, "runs", "base", "seed_2"))
    with open(os.path.join(out, "invocations.json"), encoding="utf-8") as f:
        (inv,) = json.load(f)
    ran = {k: r for k, r in inv["runs"].items() if k != "base/seed_2"}
    assert inv["procs"] == 2 and len(ran) == 2 and all(r["after"] > 0 for r in ran.values())


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:  # (a zombie has exited)
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "batch"), [(signal.SIGTERM, 1), (signal.SIGINT, 2)], ids=["SIGTERM", "SIGINT-batch2"]
)
def test_a_signal_stops_every_run_with_a_checkpoint(tmp_path: str, sig: int, batch: int) -> None:
    """``kill PID`` or ``kill -INT PID`` on a command started as ``cmd &`` (SIGINT ignored,
    as a non-interactive shell starts it): every run stops with its checkpoint, none is
    left running, the report is written; with ``--batch 2`` both seeds in one process."""
    out = os.path.join(tmp_path, "camp")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), out, "--seeds", "0-1",
           "--steps", "200000", "--procs", "2", "--batch", str(batch), "--", *TINY]  # fmt: skip

    def background() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    err = os.path.join(tmp_path, "stderr")
    with open(err, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd, stderr=f, cwd=ROOT, preexec_fn=background)
    runs = [os.path.join(out, "runs", "base", f"seed_{s}") for s in (0, 1)]
    deadline = time.time() + 240
    while not all(_evals(r) if os.path.isfile(os.path.join(r, "metrics.jsonl")) else {}
                  for r in runs):  # fmt: skip
        assert proc.poll() is None and time.time() < deadline, _text(err)
        time.sleep(1)
    proc.send_signal(sig)
    try:
        assert proc.wait(timeout=180) == 130
    finally:  # (runs left going by a failure would outlive the test: 200 000 steps each)
        text = _text(err)
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", text)]
        alive = [p for p in pids if _alive(p)]
        for pid in alive:
            os.killpg(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    assert len(pids) == 2 // batch and not alive, text
    again = text.split("stopped; the same command continues every run: ", 1)[1].splitlines()[0]
    assert shlex.split(again)[2:] == cmd[2:], again
    assert f", {2 // batch} at a time on cpu" in text, text  # (processes, not seeds)
    with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
        said = "1 process (2 seeds each, batched) on cpu" if batch == 2 else "2 processes on cpu"
        assert f"invocation 1: {said}, 2 runs" in f.read()
    for s, run in zip((0, 1), runs, strict=True):
        name = f"base/seed_{s}" if batch == 1 else "base/seeds_0,1"
        assert f"{name} stopped at step" in text, text
        assert os.path.isfile(os.path.join(run, "ckpt", "last.pt"))
    assert os.path.isfile(os.path.join(out, "summary.md"))


def test_a_run_stopped_by_another_process_is_said_to_be_in_its_own_words(tmp_path: str) -> None:
    """A SIGINT that seeds.py did not send (a ``kill -INT`` from another shell) stops that run
    with its checkpoint; seeds.py repeats the run's last line, which names the sender."""
    out = os.path.join(tmp_path, "camp")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), out, "--seeds", "0",
           "--steps", "200000", "--", *TINY]  # fmt: skip
    err = os.path.join(tmp_path, "stderr")
    with open(err, "w", encoding="utf-8") as f:
        proc = subprocess.Popen(cmd, stderr=f, cwd=ROOT, start_new_session=True)
    run = os.path.join(out, "runs", "base", "seed_0")
    try:
        deadline = time.time() + 240
        while not (os.path.isfile(os.path.join(run, "metrics.jsonl")) and _evals(run)):
            assert proc.poll() is None and time.time() < deadline, _text(err)
            time.sleep(0.5)
        (pid,) = [int(p) for p in re.findall(r"\(pid (\d+)\)", _text(err))]
        os.kill(pid, signal.SIGINT)
        assert proc.wait(timeout=180) == 0, _text(err)
    finally:  # (a run left going would outlive the test: 200 000 steps)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = _text(err)
    said = stop_line(os.path.join(out, "logs", "base__seed_0.log"))
    assert said.startswith("stopped (Ctrl-C) at step"), said
    assert re.search(
        rf"base/seed_0 stopped at step [\d,]+ \(\d+ s\)\n  it says: {re.escape(said)}", text
    )
    assert os.path.isfile(os.path.join(run, "ckpt", "last.pt"))


def test_bad_input_is_refused_before_any_run(tmp_path: str) -> None:
    out = os.path.join(tmp_path, "camp")
    for args, close in [
        (["--vary", "model=gausian"], "model='gausian' is not one of the model choices; did you "
         "mean gaussian?"),
        (["--variant", "rollout.max_lenght=3"], "did you mean rollout.max_length?"),
        (["--vary", "model=flow", "total_step=3"], "did you mean total_steps?"),  # every run's
        (["--reference", "docs/reference/mbpo_hopper.csv"], "mbpo_hopper.csv is hopper's curve "
         "(its file name); the runs are env=pendulum"),
        (["--reference", "no_such.csv"], "--reference no_such.csv: No such file or directory"),
        # a budget without a unit counts seconds: too few for any run to start, work and stop
        (["--budget", "10"], "--budget 10: 10 s leaves no run time to start, work and stop"),
        (["--budget", "2m"], "--budget 2m: 120 s leaves no run time"),
        (["--budget", "149s"], "(at least 150 s); give more"),
        (["--steps", "-100"], "--steps -100: give a positive number of env steps per run"),
        (["--steps", "0"], "--steps 0: give a positive number"),
        (["--steps", "2k"], "error: argument --steps: '2k': give a whole number, e.g. 50000"),
        (["--seeds", "0-"], "--seeds '0-': give seeds as 0-4 or 0,1,2"),
        (["--vary", "model=flow,flow"], "--vary 'model=flow,flow': flow given twice; give each"),
        (["--vary", "model=flow", "--vary", "model=gaussian"], "model is varied twice; give its "
         "values in one"),
        # a value that starts with "-" is the option's value, not another option
        (["--budget", "-5m"], "--budget '-5m': give a duration such as 2h"),
    ]:  # fmt: skip
        res = seeds(out, *args)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1 and close in lines[0], res.stderr
    assert not os.path.exists(os.path.join(out, "runs"))
    assert not os.path.exists(os.path.join(out, "seeds.json"))
    for text in ("a-b", "0-", "3-", "0,,2", "0,1,", "-1", "0-2-3"):  # (0- is no range to 0)
        with pytest.raises(ValueError, match=f"--seeds '{text}': give seeds as 0-4 or 0,1,2"):
            parse_seeds(text)
    assert parse_seeds("0, 2") == [0, 2]
    with pytest.raises(ValueError, match="1-0 counts down; give it as 0-1"):
        parse_seeds("3,1-0")
    with pytest.raises(ValueError, match="--budget"):
        parse_duration("2 hours")


def test_batches_group_each_variants_seeds_that_are_at_one_step(tmp_path: str) -> None:
    """--batch 2: a variant's seeds two by two, in order, every variant's first two seeds before
    any variant's next (a campaign cut short keeps its pairs); a group whose runs are at
    different steps (one has a checkpoint, one not) runs one by one, and says so."""
    flow, gauss = Variant(("model=flow",)), Variant(("model=gaussian",))
    jobs = [
        Job(v, s, os.path.join(tmp_path, v.folder, f"seed_{s}"))
        for s in range(3)
        for v in (flow, gauss)
    ]
    ahead = jobs[3].path  # gaussian seed 1: a checkpoint at step 500 (what seeds.py reads of it)
    os.makedirs(os.path.join(ahead, "ckpt"))
    head = {"format": checkpoint.FORMAT_VERSION, "env": "hopper", "step": 500}
    torch.save(head, os.path.join(ahead, "ckpt", "last.pt"))
    units, said = batches(jobs, 2)
    names = [u.name for u in units]
    assert names == [
        "model-flow/seeds_0,1",
        "model-gaussian/seed_0",
        "model-gaussian/seed_1",
        "model-flow/seed_2",
        "model-gaussian/seed_2",
    ]  # fmt: skip (seed-major)
    one, _ = batches(jobs, 1)  # one process a run: the seeds' pairs first, in jobs' order
    assert [u.name for u in one] == [j.name for j in jobs]
    assert said == [
        "model-gaussian: seed 0 at 0, seed 1 at 500: not at one step, so run one by one"
    ]
    batch = units[0]
    assert isinstance(batch, Batch)
    cmd = batch.command([], 1000, 1, None)
    assert f"hydra.run.dir={jobs[0].path}" in cmd and "seed=0" in cmd
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (dirs,) = OverridesParser.create().parse_overrides([cmd[-1]])  # (as train.py reads it)
    assert cmd[-2] == "batch_seeds=2" and (dirs.key_or_group, dirs.value()) == (
        "batch_dirs",
        [jobs[2].path],
    )


def test_settings_that_cannot_act_are_warned_of_at_the_start_and_in_the_report(
    tmp_path: str,
) -> None:
    """A campaign whose runs end within the random steps learns nothing: said before the runs
    start (once per warning, naming the variants it holds for unless all) and in the report,
    which a later --report-only writes again for the campaign's last target."""
    out = os.path.join(tmp_path, "camp")
    arms = ["--variant", "algorithm.init_steps=100", "--variant", "algorithm.init_steps=50"]
    res = seeds(out, "--seeds", "0", "--steps", "80", "--procs", "1", *arms)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    sac = "SAC (agent.*) cannot act in these runs: no SAC update: algorithm.init_steps=100"
    note = "note: algorithm.init_steps=100 (for every run) applies to none: each variant sets"
    assert lines[1].startswith(note), res.stderr  # (TINY's, for every run)
    assert f"warning (algorithm.init_steps=100): {sac}" in lines[2], res.stderr
    evals = "warning: eval.every=100 cannot act in these runs: its first step would be 100"
    assert sum(line.startswith(evals) for line in lines) == 1, res.stderr  # (both variants)
    assert not any("init_steps=50 random steps" in line for line in lines), res.stderr
    bundle = os.path.join(tmp_path, "bundle")  # (its metrics alone: no invocations.json)
    with tarfile.open(os.path.join(out, "metrics.tar.gz")) as tar:
        tar.extractall(bundle, filter="data")
    again = [out, "--report-only"], [bundle, "--seeds", "0", *arms, "--report-only", "--", *TINY]
    for args in ([], *again):  # (the run's report, then written again from its folder, bundle)
        if args:
            os.remove(os.path.join(out, "summary.md"))
            cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), *args]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
        with open(os.path.join(args[0] if args else out, "summary.md"), encoding="utf-8") as f:
            report = f.read()
        assert f"- in the runs of algorithm.init_steps=100: {sac}" in report, report
        assert f"- {evals.removeprefix('warning: ')}" in report, report


def test_the_rate_alone_says_when_the_machine_was_shared() -> None:
    """An invocation records the machine's load average: a run of one process at a time
    beside other work is not called alone (its own process is a load of about its threads)."""
    from mbrl.tools.seed_report import solo_rate, throughput

    runs = {"base/seed_0": {"before": 0, "after": 1000, "seconds": 10.0}}
    inv = {"start": 0.0, "end": 12.0, "procs": 1, "device": "cpu", "runs": runs}
    assert solo_rate([inv]) == "one process alone: 100.0 env steps/s (invocation 1's median run)"
    busy = inv | {"load": [2.4, 2.8], "cores": 2, "threads": 1}
    assert solo_rate([busy]) == (
        "one process at a time, on a shared machine: 100.0 env steps/s (invocation 1's median "
        "run; load average 2.6 on 2 cores)"
    )
    assert throughput([busy])[0].endswith("100.0 per run (median); load average 2.6 on 2 cores")
    two = busy | {"threads": 2, "load": [2.0, 2.4]}  # (a two-thread run alone)
    assert solo_rate([two]).startswith("one process alone: 100.0")


def test_parsing_and_stages() -> None:
    assert parse_seeds("0-2,7") == [0, 1, 2, 7]
    assert whole_number("5e4") == 50000 and whole_number("300") == 300
    for bad in ("2k", "1.5", "nan", "inf"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"'{bad}': give a whole number"):
            whole_number(bad)
    arms = variants(["model=flow,gaussian"], ["model=flow agent.init=torch"])
    assert [a.label for a in arms] == [
        "model=flow",
        "model=gaussian",
        "model=flow agent.init=torch",
    ]
    assert overridden(["env=hopper", "agent.init=glorot", "model=flow"], arms) == [
        "note: agent.init=glorot (for every run) does not apply to model=flow agent.init=torch, "
        "which sets agent.init",
        "note: model=flow (for every run) applies to none: each variant sets model",
    ]
    assert parse_duration("1h30m") == 5400 and parse_duration("45") == 45
    assert stages(20000, 5000) == [5000, 10000, 15000, 20000]
    assert stages(12000, 5000) == [5000, 10000, 12000]
    assert stages(20000, None) == [20000]


def test_the_stop_line_is_this_invocations(tmp_path: Path) -> None:
    """A run's log holds every invocation's output: the line repeated is the last one's (a
    second Ctrl-C's "quit at once" too), never an earlier invocation's, and a progress bar's
    carriage-return redraws are lines of their own."""
    log = str(tmp_path / "run.log")
    earlier = (
        "\n$ python train.py ...\nstopped (max_minutes=3.2 reached) at step 1,200 after 3 min\n"
    )
    with open(log, "w", encoding="utf-8") as f:
        f.write(earlier + "\n$ python train.py resume=...\ntrain: 10%\rtrain: 20%\r")
    assert stop_line(log) == "train: 20%"  # (it said nothing of a stop: its last line)
    with open(log, "a", encoding="utf-8") as f:
        f.write("\nquit at once without saving (Ctrl-C): ckpt/last.pt holds step 1,200\n")
    assert stop_line(log).startswith("quit at once without saving")


def test_stand_still_evaluations() -> None:
    """Hopper: alive bonus 1, limit 1000. A policy that stands still earns ~1 per step."""
    assert stands_still(1007.0, 1000.0, 1000, 1.0)
    assert not stands_still(1100.0, 1000.0, 1000, 1.0)  # it moved forward: more than 5 %
    assert not stands_still(990.0, 990.0, 1000, 1.0)  # one episode fell before the limit
