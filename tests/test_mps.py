"""CUDA MPS in scripts/seeds.py, on a CPU: a stand-in control command (a real daemon process
that notes what happens to it) started, joined by the runs, quit when they are done, on
Ctrl-C and on SIGTERM; a start that fails is one line and the runs go on. And the figures
seeds.py keeps for the MPS measurement: each run's env steps/s past the random steps, the
GPU memory in use."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from mbrl.envs.vector import CORES_ENV
from mbrl.tools.mps import CONTROL_ENV, LOG, PIPE, Mps, start, wanted
from mbrl.tools.seed_speed import GpuMemory, run_speed, speed_lines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = [
    "env=pendulum", "algorithm=sac", "algorithm.init_steps=100", "algorithm.updates_per_step=1",
    "agent.hidden_sizes=[16,16]", "agent.batch_size=32", "eval.every=100", "eval.episodes=2",
    "compile=false", "logger.tensorboard=false", "logger.every=50",
]  # fmt: skip

# The stand-in: ``-d`` forks a daemon that stays until another invocation gets ``quit`` on
# its stdin; the daemon notes the processes that joined it (their environment names its pipe
# folder, read from /proc) and how many were still there when it was asked to quit.
STANDIN = """#!{python}
import os, sys, time
RECORD, FAIL = {record!r}, {fail!r}
pipe = os.environ["{pipe_var}"]

def note(text):
    with open(RECORD, "a") as f:
        f.write(text + "\\n")

def clients():  # (not this script's own processes: the daemon, a quit command)
    mark, found = ("{pipe_var}=" + pipe).encode(), set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                joined = mark in f.read().split(b"\\0")
            with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                ours = sys.argv[0].encode() in f.read().split(b"\\0")
        except OSError:
            continue
        if joined and not ours:
            found.add(int(pid))
    return found

if sys.argv[1:] == ["-d"]:
    if FAIL:
        print("An instance of this daemon is already running")
        sys.exit(1)
    if os.fork():
        sys.exit(0)
    os.setsid()
    note(f"start {{os.getpid()}} {{pipe}} {{os.environ['{log_var}']}}")
    seen, t0 = set(), time.time()
    quit_file = os.path.join(pipe, "quit")
    while not os.path.exists(quit_file):
        if not os.path.isdir(pipe) or time.time() - t0 > 900:
            note("orphaned")
            sys.exit(1)
        seen |= clients()
        time.sleep(0.5)
    note(f"quit with {{len(clients())}} clients; joined: {{sorted(seen)}}")
    os.remove(quit_file)
    sys.exit(0)
note("command " + sys.stdin.read().strip())
open(os.path.join(pipe, "quit"), "w").close()
deadline = time.time() + 10
while os.path.exists(os.path.join(pipe, "quit")) and time.time() < deadline:
    time.sleep(0.1)
"""


def standin(tmp_path: str, fail: bool = False) -> tuple[str, str]:
    """(the stand-in's path, its record file)."""
    record = os.path.join(tmp_path, "mps_record.txt")
    path = os.path.join(tmp_path, "mps-control")
    with open(path, "w", encoding="utf-8") as f:
        f.write(STANDIN.format(python=sys.executable, record=record, fail=fail,
                               pipe_var=PIPE, log_var=LOG))  # fmt: skip
    os.chmod(path, 0o755)
    return path, record


def _lines(path: str) -> list[str]:
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:  # (a zombie has exited)
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_quit(record: str) -> list[str]:
    """The record once its daemon has noted its quit (or after 10 s)."""
    deadline = time.time() + 10
    while not any(line.startswith("quit") for line in _lines(record)) and time.time() < deadline:
        time.sleep(0.1)
    return _lines(record)


def test_the_daemon_starts_and_quits(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    control, record = standin(str(tmp_path))
    monkeypatch.setenv(CONTROL_ENV, control)
    log = os.path.join(tmp_path, "logs", "mps")
    mps, said = start(log, probe=False)
    assert mps is not None, said
    assert said.startswith("MPS: its daemon's pipes in ") and mps.pipe in said
    deadline = time.time() + 10
    while not _lines(record) and time.time() < deadline:
        time.sleep(0.1)
    (first,) = _lines(record)
    _, pid, pipe, logged = first.split()
    assert (pipe, logged) == (mps.pipe, os.path.abspath(log)) and os.path.isdir(pipe)
    assert mps.env == {PIPE: pipe, LOG: logged}
    assert _alive(int(pid))  # a daemon: it outlives the command that started it
    lost = Mps(os.path.join(tmp_path, "missing"), mps.pipe, mps.log).stop()  # (a quit that fails)
    assert lost.startswith("MPS: its daemon did not quit (") and "\n" not in lost
    assert lost.endswith(f"to quit it: echo quit | {PIPE}={pipe} {tmp_path}/missing")
    assert os.path.isdir(pipe) and _alive(int(pid))  # (its pipe folder kept: it finds the daemon)
    assert mps.stop() == "MPS: its daemon quit"
    lines = _wait_quit(record)
    assert lines[1] == "command quit" and lines[2].startswith("quit with 0 clients"), lines
    assert not os.path.exists(pipe)
    deadline = time.time() + 10
    while _alive(int(pid)) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid))


def test_a_failed_start_is_one_line(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    control, record = standin(str(tmp_path), fail=True)
    monkeypatch.setenv(CONTROL_ENV, control)
    before = {d for d in os.listdir("/tmp") if d.startswith("flowmbpo-mps-")}
    mps, said = start(os.path.join(tmp_path, "log"), probe=False)
    assert mps is None and "\n" not in said
    assert said.startswith(f"MPS cannot start: {control} -d exited with 1: ")
    assert "An instance of this daemon is already running" in said
    assert said.endswith("; the runs go on without it") and not _lines(record)
    monkeypatch.setenv(CONTROL_ENV, os.path.join(tmp_path, "missing"))
    mps, said = start(os.path.join(tmp_path, "log"), probe=False)
    assert mps is None and "\n" not in said and "No such file" in said
    monkeypatch.delenv(CONTROL_ENV)
    monkeypatch.setenv("PATH", str(tmp_path))  # (no nvidia-cuda-mps-control there)
    if not os.path.exists("/usr/local/nvidia/bin/nvidia-cuda-mps-control"):
        mps, said = start(os.path.join(tmp_path, "log"), probe=False)
        assert mps is None and "neither on PATH nor in /usr/local/nvidia/bin" in said
    left = {d for d in os.listdir("/tmp") if d.startswith("flowmbpo-mps-")} - before
    assert not left  # (no pipe folder left behind by a start that failed)


def test_a_daemon_no_cuda_process_can_join_is_quit(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On this CPU machine the probe's CUDA process fails as it would beside a server that
    cannot start: one line, and the daemon it started is quit."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device: the probe would join")
    control, record = standin(str(tmp_path))
    monkeypatch.setenv(CONTROL_ENV, control)
    mps, said = start(os.path.join(tmp_path, "log"), probe=True)
    assert mps is None and "\n" not in said, said
    assert said.startswith("MPS cannot start: a CUDA process could not join its daemon: ")
    lines = _wait_quit(record)
    assert lines[0].startswith("start ") and lines[1] == "command quit", lines
    assert not os.path.exists(lines[0].split()[2])


def test_when_mps_is_wanted() -> None:
    assert wanted("auto", "cuda", 4) == (True, "--mps auto: 4 processes on one GPU")
    assert wanted("auto", "cuda", 1) == (False, "--mps auto: one process at a time")
    assert wanted("auto", "cpu", 4) == (False, "--mps auto: the runs are on cpu")
    assert wanted("on", "cpu", 1)[0] and not wanted("off", "cuda", 8)[0]
    with pytest.raises(ValueError, match="--mps 'yes': give one of auto, on, off"):
        wanted("yes", "cuda", 4)


def _row(step: int, stamp: float, wall: float, **extra: object) -> str:
    return json.dumps({"step": step, "time": stamp, "time/wall": wall, **extra}) + "\n"


def test_a_run_stopped_with_ctrl_z_is_timed_without_the_pause(tmp_path: str) -> None:
    """An interval that held a pause (``time/paused``: Ctrl-Z, kill -STOP) counts the time the
    run ran, and is not taken for a stop and a resume (its stamps are 200 s apart)."""
    run = str(tmp_path)
    rows = [_row(1000, 10.0, 10.0), _row(2000, 20.0, 10.0), _row(3000, 220.0, 10.0,
            **{"time/paused": 190.0}), _row(4000, 230.0, 10.0)]  # fmt: skip
    with open(os.path.join(run, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(rows)
    got = run_speed(run, since=0.0)  # (no init_steps: counted from the second interval)
    assert got is not None and (got["steps"], got["seconds"]) == (2000, pytest.approx(20.0))


def test_the_rate_past_the_random_steps(tmp_path: str) -> None:
    """Log lines every 1000 steps, random steps to 2000: a line of an earlier invocation,
    a resume (stamps 500 s apart over a 12 s time/wall), evaluation lines between."""
    run = str(tmp_path)
    with open(os.path.join(run, "config.yaml"), "w", encoding="utf-8") as f:
        f.write("algorithm:\n  init_steps: 2000\n")
    rows = [_row(1000, 90.0, 1.0), _row(2000, 100.0, 10.0), _row(3000, 110.0, 10.0),
            json.dumps({"step": 3000, "time": 110.5, "eval/return_mean": 1.0}) + "\n",
            _row(4000, 122.0, 11.5, **{"process/gpu_peak_mb": 900.0}),
            _row(5000, 622.0, 12.0),
            _row(6000, 640.0, 18.0, **{"speed/sac_update": "eager"}),
            # a resume at once (its stamp 21 s after, over 20 s of which 8 s ran before it)
            _row(7000, 661.0, 20.0,
                 **{"process/carried_seconds": 8.0, "speed/sac_update": "eager",
                    "speed/device": "NVIDIA H200"})]  # fmt: skip
    with open(os.path.join(run, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(rows)
    got = run_speed(run, since=95.0)  # (the line at 1000 came before this invocation)
    assert got is not None
    # counted: 3000->4000 (12 s), 5000->6000 (18 s); not 2000->3000 (the first model fit
    # and compiles), nor 4000->5000 (a stop and a resume), nor 6000->7000 (a resume the
    # line names)
    assert (got["steps"], got["seconds"]) == (2000, pytest.approx(30.0))
    assert (got["first"], got["last"]) == (110.0, 640.0)
    # (what ran, not where: the invocation names its device)
    assert got["ran"] == {"speed/sac_update": "eager"} and got["gpu_peak_mb"] == 900.0
    assert run_speed(run, since=700.0) is None
    other = {**got, "steps": 1000, "seconds": 20.0, "first": 100.0, "last": 650.0}
    inv = {"mps": True, "gpu_memory_mb": {"before": 500.0, "peak": 4500.0},
           "runs": {"base/seed_0": {"past_random": got}, "base/seed_1": {"past_random": other},
                    "base/seed_2": {}}}  # fmt: skip
    none, line = speed_lines([{"runs": {}}, inv])  # (3 runs, 1 process at a time)
    assert none.startswith("invocation 1, past the random steps: not measured (no run logged")
    assert line.startswith("invocation 2, past the random steps: 2 of 3 runs, ")
    assert f"{(2000 / 30 + 1000 / 20) / 2:,.1f} env steps/s each (median; 50.0-66.7)" in line
    assert f"{3000 / (650 - 100):,.1f} together; MPS on; ran: sac update eager" in line
    apart = {
        **inv,
        "runs": {
            "base/seed_0": {"past_random": {**other, "first": 100.0, "last": 200.0}},
            "base/seed_1": {"past_random": {**other, "first": 300.0, "last": 450.0}},
            "base/seed_2": {},
        },
    }  # (one run after the other: the gap between them is not counted)
    (line,) = speed_lines([apart])
    assert f"{2000 / (100 + 150):,.1f} together;" in line
    (line,) = speed_lines([{**inv, "procs": 3}])  # (all at once: each rate over its window)
    assert f"{2000 / 30 + 1000 / 20:,.1f} together (summed); MPS on" in line
    assert "GPU memory per run: 900-900 MB" in line
    assert "by variant" not in line  # (one variant: its median is the line's)
    assert "GPU memory in use: 4,500 MB at most (500 before)" in line


def test_speed_line_gives_each_variants_median_where_the_runs_are_of_several() -> None:
    def fig(steps: int, seconds: float) -> dict[str, object]:
        return {"steps": steps, "seconds": seconds, "first": 0.0, "last": seconds, "ran": {}}

    runs = {"sac/seed_0": fig(1000, 100.0), "sac/seed_1": fig(1000, 200.0),
            "mbpo/seed_0": fig(1000, 400.0), "mbpo/seed_1": fig(1000, 250.0),
            "mbpo/seed_2": fig(1000, 500.0)}  # fmt: skip
    inv = {"procs": 5, "runs": {k: {"past_random": v} for k, v in runs.items()}}
    (line,) = speed_lines([inv])
    # all five: 10, 5, 2.5, 4, 2 env steps/s; SAC's 10 and 5, MBPO's 2.5, 4 and 2
    assert "4.0 env steps/s each (median; 2.0-10.0) [by variant: " in line
    assert "sac 7.5 (5.0-10.0, 2 runs); mbpo 2.5 (2.0-4.0, 3 runs)]" in line


def test_gpu_memory_sampled_from_nvidia_smi(tmp_path: str) -> None:
    smi = os.path.join(tmp_path, "smi")
    with open(smi, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\necho 1200\necho 300\n")  # (two GPUs: MB in use on each)
    os.chmod(smi, 0o755)
    memory = GpuMemory([smi])
    deadline = time.time() + 10
    while not memory.samples and time.time() < deadline:
        time.sleep(0.05)
    memory.stop()
    assert memory.figures() == {"before": 1500.0, "peak": 1500.0}
    none = GpuMemory([os.path.join(tmp_path, "no-such-tool")])
    none.stop()
    assert none.figures() is None


def seeds(out: str, control: str, err: str, *args: str) -> subprocess.Popen[bytes]:
    """seeds.py with the stand-in as its MPS control command, its stderr to ``err``; started
    as a shell's ``cmd &`` starts it (SIGINT ignored: seeds.py takes it back)."""
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "seeds.py"), out, *args, "--", *TINY]
    env = {**os.environ, CONTROL_ENV: control}

    def background() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with open(err, "w", encoding="utf-8") as f:
        return subprocess.Popen(cmd, stderr=f, cwd=ROOT, env=env, preexec_fn=background)


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _evals(run: str) -> list[int]:
    path = os.path.join(run, "metrics.jsonl")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["step"] for r in rows if "eval/return_mean" in r]


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [p.decode().split("=", 1) for p in f.read().split(b"\0") if b"=" in p]
    return dict(pairs)


@pytest.mark.slow
def test_seeds_runs_join_the_daemon_and_it_quits_at_the_end(tmp_path: str) -> None:
    control, record = standin(str(tmp_path))
    out, err = os.path.join(tmp_path, "camp"), os.path.join(tmp_path, "stderr")
    proc = seeds(out, control, err, "--seeds", "0-1", "--steps", "200", "--procs", "2",
                 "--mps", "on")  # fmt: skip
    assert proc.wait(timeout=300) == 0, _text(err)
    text = _text(err)
    assert "2 at a time on cpu, MPS on (--mps on)" in text and "MPS: its daemon quit" in text
    start_line, command, quit_line = _wait_quit(record)
    _, pid, pipe, log = start_line.split()
    assert log == os.path.join(out, "logs", "mps") and command == "command quit"
    runs = [int(p) for p in re.findall(r"\(pid (\d+)\)", text)]
    joined = json.loads(quit_line.split("joined: ")[1])
    assert len(runs) == 2 and set(runs) <= set(joined), (runs, joined)
    assert quit_line.startswith("quit with 0 clients")  # (quit after the runs ended)
    assert not os.path.exists(pipe) and not _alive(int(pid))
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        (inv,) = json.load(f)["invocations"]
    assert inv["mps"] is True and inv["gpu_memory_mb"] is None  # (a CPU: no nvidia-smi figure)
    for s in (0, 1):  # log lines at 50, 100, 150, 200; random steps to 100: 100->150 is
        fast = inv["runs"][f"base/seed_{s}"]["past_random"]  # the first update's interval
        assert fast["steps"] == 50 and 0 < fast["seconds"] < 300
    summary = _text(os.path.join(out, "summary.md"))
    assert "invocation 1, past the random steps: 2 of 2 runs, " in summary
    assert " together (summed); MPS on" in summary


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_runs_then_the_daemon(tmp_path: str, sig: int) -> None:
    """``kill PID`` or ``kill -INT PID``: the runs stop with their checkpoints, then the
    daemon quits (none of its clients left), and the command exits with 130."""
    control, record = standin(str(tmp_path))
    out, err = os.path.join(tmp_path, "camp"), os.path.join(tmp_path, "stderr")
    proc = seeds(out, control, err, "--seeds", "0-1", "--steps", "200000", "--procs", "2",
                 "--mps", "on")  # fmt: skip
    runs = [os.path.join(out, "runs", "base", f"seed_{s}") for s in (0, 1)]
    deadline = time.time() + 240
    pids: list[int] = []
    try:
        while not all(_evals(r) for r in runs):
            assert proc.poll() is None and time.time() < deadline, _text(err)
            time.sleep(1)
        pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", _text(err))]
        (start_line,) = _lines(record)
        _, daemon, pipe, log = start_line.split()
        share = str(max(1, (os.cpu_count() or 1) // 2))  # (and its share of the cores)
        for pid in pids:  # each run has the daemon's two folders in its environment
            env = _environ(pid)
            assert (env[PIPE], env[LOG]) == (pipe, log), env
            assert env[CORES_ENV] == share, env
            assert env["TORCHINDUCTOR_COMPILE_THREADS"] == os.environ.get(
                "TORCHINDUCTOR_COMPILE_THREADS", share
            )
        proc.send_signal(sig)
        assert proc.wait(timeout=180) == 130, _text(err)
    finally:  # (runs left going by a failure would outlive the test: 200 000 steps each)
        for pid in [p for p in pids if _alive(p)]:
            os.killpg(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    text = _text(err)
    assert len(pids) == 2, text
    stopped = [text.index(f"base/seed_{s} stopped at step") for s in (0, 1)]
    assert max(stopped) < text.index("MPS: its daemon quit"), text
    assert all(os.path.isfile(os.path.join(r, "ckpt", "last.pt")) for r in runs)
    lines = _wait_quit(record)
    assert lines[1:2] == ["command quit"] and lines[2].startswith("quit with 0 clients"), lines
    assert set(pids) <= set(json.loads(lines[2].split("joined: ")[1]))
    assert not os.path.exists(pipe) and not _alive(int(daemon))


@pytest.mark.slow
def test_a_failed_start_leaves_the_runs_going_without_it(tmp_path: str) -> None:
    control, record = standin(str(tmp_path), fail=True)
    out, err = os.path.join(tmp_path, "camp"), os.path.join(tmp_path, "stderr")
    proc = seeds(out, control, err, "--seeds", "0", "--steps", "200", "--mps", "on")
    assert proc.wait(timeout=300) == 0, _text(err)
    text = _text(err)
    said = [line for line in text.splitlines() if "MPS" in line]
    assert len(said) == 2 and said[0].startswith("MPS cannot start: "), text
    assert said[0].endswith("the runs go on without it")
    assert "MPS off (--mps on: it could not start)" in said[1]  # (the start line)
    assert _evals(os.path.join(out, "runs", "base", "seed_0")) == [100, 200]
    assert not _lines(record)  # (the stand-in never started, nor was asked to quit)
