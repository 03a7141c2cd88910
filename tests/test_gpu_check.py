"""scripts/gpu_check.py, the first command on a GPU machine, checked here on the CPU
(``--device cpu --quick`` runs the same steps): every step's figures reach the output folder
as soon as they are measured, so a check killed at any moment leaves them and a summary; a
step past its limit is killed with its whole process group; strict mode turns a compile
failure into a failed step that names its cause; the output stays within what a GPU lease
gives back (at most 8 files, 16 MiB each, two folders deep)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import torch

from mbrl.bench import gpu_run
from mbrl.bench.gpu_run import last_test, output_problems, run_step, trim

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.py")


def _read(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert isinstance(data, dict)
    return data


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, killed and not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _check(out: str, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, SCRIPT, "--device", "cpu", "--quick", "--out", out, *flags]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env=env,
    )  # fmt: skip


def test_the_check_killed_after_its_first_step_leaves_its_json_and_a_summary(
    tmp_path: str,
) -> None:
    """SIGKILL to the check (and to the step it had started) once the first step is done:
    that step's JSON and a summary that names it are in the output folder."""
    out = os.path.join(tmp_path, "out")
    proc = _check(out)
    summary_path, deadline = os.path.join(out, "summary.json"), time.monotonic() + 300
    second: dict[str, Any] = {}
    while "pid" not in second and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if os.path.exists(summary_path):
            second = _read(summary_path)["steps"].get("sac", {})
    os.killpg(proc.pid, signal.SIGKILL)  # the check itself
    if "pid" in second:
        os.killpg(second["pid"], signal.SIGKILL)  # the step it had started (its own session)
    proc.wait()
    assert second.get("outcome") == "running", "the check never reached its second step"
    versions = _read(os.path.join(out, "versions.json"))
    assert versions["versions"]["torch"] == torch.__version__
    assert versions["device"] == {"device": "cpu", "cpu_cores": os.cpu_count()}
    summary = _read(summary_path)
    assert summary["steps"]["versions"]["outcome"] == "ok"
    assert summary["versions"] == versions  # the summary holds the step's figures
    with open(os.path.join(out, "summary.txt"), encoding="utf-8") as f:
        text = f.read()
    assert f"torch {torch.__version__}" in text and "strict mode on" in text
    assert "step versions  ok" in text and "step sac       running" in text
    assert output_problems(out) == []


def test_a_step_past_its_limit_is_killed_with_its_process_group(tmp_path: str) -> None:
    """A step that measured one figure, started a worker of its own and then hangs: at its
    limit both are killed, and the figure stays."""
    figures, worker_pid = os.path.join(tmp_path, "step.json"), os.path.join(tmp_path, "pid")
    program = (
        "import json, subprocess, sys, time\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({worker_pid!r}, 'w').write(str(worker.pid))\n"
        f"json.dump({{'eager': {{'updates_per_s': 12.5}}}}, open({figures!r}, 'w'))\n"
        "print('measured one', flush=True)\n"
        "time.sleep(600)\n"
    )
    log = os.path.join(tmp_path, "steps.log")
    started: list[int] = []
    result = run_step("hang", [sys.executable, "-c", program], 5, log, None, started.append)
    assert result["outcome"] == "stopped at its 5 s limit" and 5 <= result["seconds"] < 60
    with open(worker_pid, encoding="utf-8") as f:
        worker = int(f.read())
    for _ in range(50):  # (its parent gone, the worker is reaped by init)
        if not _alive(worker):
            break
        time.sleep(0.1)
    assert not _alive(worker) and not _alive(started[0])
    assert _read(figures) == {"eager": {"updates_per_s": 12.5}}
    with open(log, encoding="utf-8") as f:
        text = f.read()
    assert "measured one" in text and "===== hang: stopped at its 5 s limit" in text


def test_strict_mode_fails_a_step_whose_compiling_fails_and_keeps_its_figures(
    tmp_path: str,
) -> None:
    """No working C++ compiler for inductor (CXX): the eager SAC block is measured, then the
    compiled one fails the step with the cause (FLOWMBPO_STRICT=1 in every step), instead
    of timing eager updates as compiled ones."""
    out = os.path.join(tmp_path, "out")
    env = {**os.environ, "CXX": "no-such-c++-compiler"}
    proc = _check(out, "--steps", "sac", env=env)
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout[-2000:]
    summary = _read(os.path.join(out, "summary.json"))
    assert summary["steps"]["sac"]["outcome"] == "failed (exit 1)"
    sac = _read(os.path.join(out, "sac.json"))["sac"]
    assert list(sac) == ["eager"] and sac["eager"]["ran"] == "eager"
    with open(os.path.join(out, "steps.log"), encoding="utf-8") as f:
        log = f.read()
    assert "FallbackError: compiling the SAC update failed" in log and "C++ compiler" in log
    assert sorted(os.listdir(out)) == ["sac.json", "steps.log", "summary.json", "summary.txt"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA the CUDA tests would run")
def test_the_tests_step_runs_the_cuda_tests_verbose_with_a_timeout(tmp_path: str) -> None:
    """On a CPU every CUDA test is selected and skipped; each is named (-v) and a per-test
    timeout is set, so a test killed on a GPU is named."""
    out = os.path.join(tmp_path, "out")
    proc = _check(out, "--steps", "tests")
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout[-2000:]
    assert sorted(os.listdir(out)) == ["steps.log", "summary.json", "summary.txt"]
    summary = _read(os.path.join(out, "summary.json"))
    assert summary["steps"]["tests"]["outcome"] == "ok"
    tests = summary["tests"]
    assert tests["passed"] == tests["failed"] == 0 and tests["skipped"] > 10
    with open(os.path.join(out, "steps.log"), encoding="utf-8") as f:
        log = f.read()
    assert "--timeout=90" in log and "-m cuda" in log
    assert "test_cuda_graphs.py::test_the_graphed_block_equals_the_eager_updates SKIPPED" in log
    assert "CUDA tests: 0 passed, 0 failed, " in stdout


def test_a_module_skipped_as_a_whole_is_not_counted_as_a_skipped_test(tmp_path: str) -> None:
    """pytest reports a module it could not import (importorskip) as one skipped case named
    after the module; the summary names it apart, and "skipped" counts tests alone."""
    folder = os.path.join(tmp_path, "t")
    os.makedirs(folder)
    with open(os.path.join(folder, "test_lacks.py"), "w", encoding="utf-8") as f:
        f.write("import pytest\npytest.importorskip('no_such_package_here')\n")
        f.write("def test_never(): pass\n")
    with open(os.path.join(folder, "test_some.py"), "w", encoding="utf-8") as f:
        f.write("import pytest\n@pytest.mark.skip(reason='no GPU')\ndef test_skipped(): pass\n")
        f.write("def test_passes(): pass\n")
    xml = os.path.join(tmp_path, "tests.xml")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", folder]
    subprocess.run([*run, f"--junitxml={xml}", "--rootdir", folder], check=False)
    outcome = gpu_run.tests_outcome(xml)
    assert (outcome["passed"], outcome["failed"], outcome["skipped"]) == (1, 0, 1)
    assert list(outcome["modules_skipped"]) == ["test_lacks"]
    assert "could not import 'no_such_package_here'" in outcome["modules_skipped"]["test_lacks"]
    assert "::test_lacks" not in outcome["slowest"]
    summary = {"device": "cpu", "seconds": 1.0, "budget_s": 1.0, "steps": {}, "tests": outcome}
    text = gpu_run.summary_text(summary)
    assert "CUDA tests: 1 passed, 0 failed, 1 skipped" in text
    assert "module skipped as a whole: test_lacks (could not import" in text


@pytest.mark.slow
def test_the_whole_check_runs_on_a_cpu(tmp_path: str) -> None:
    """Every step, at --quick sizes: each measured figure says what ran, and the output
    stays within what comes back."""
    out = os.path.join(tmp_path, "out")
    proc = _check(out)
    stdout, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, stdout[-3000:]
    summary = _read(os.path.join(out, "summary.json"))
    assert {s: r["outcome"] for s, r in summary["steps"].items()} == dict.fromkeys(
        ("versions", "sac", "model", "profile", "tests"), "ok"
    )
    sac = summary["sac"]["sac"]
    assert sac["eager"]["ran"] == "eager" and sac["compiled"]["ran"] == "compiled"
    fits = summary["model"]["fit"]
    assert {r["ran"] for n, r in fits.items() if ", compiled" in n} == {"compiled"}
    assert len(fits) == 6 and len(summary["model"]["rollout"]) == 3
    assert summary["profile"]["window"]["sac_updates"] >= 20
    assert summary["output_problems"] == [] and len(os.listdir(out)) <= 8


def test_unknown_steps_and_a_missing_gpu_are_refused(tmp_path: str) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--device", "cpu", "--steps", "tests,fly", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "unknown step(s) ['fly']" in proc.stderr
    if not torch.cuda.is_available():
        proc = subprocess.run(
            [sys.executable, SCRIPT, "--out", str(tmp_path)], capture_output=True, text=True
        )
        assert proc.returncode == 2 and "--device cuda: torch sees no CUDA device" in proc.stderr
    assert not os.listdir(tmp_path)


def test_output_that_would_not_come_back_is_named(tmp_path: str) -> None:
    """More than 8 files, a file over 16 MiB, a file three folders deep."""
    deep = os.path.join(tmp_path, "a", "b", "c")
    os.makedirs(deep)
    for i in range(8):
        open(os.path.join(tmp_path, f"f{i}.json"), "w").close()
    open(os.path.join(deep, "trace.json"), "w").close()
    with open(os.path.join(tmp_path, "big.log"), "wb") as f:
        f.truncate(16 * 2**20 + 1)
    assert sorted(output_problems(str(tmp_path))) == [
        "10 files (at most 8 come back)",
        f"{os.path.join('a', 'b', 'c', 'trace.json')} is more than 2 folders deep",
        "big.log is over 16 MiB",
    ]
    trim(os.path.join(tmp_path, "big.log"), limit=1000)
    assert os.path.getsize(os.path.join(tmp_path, "big.log")) < 1100


def test_a_test_run_killed_midway_names_the_test_that_was_running(tmp_path: str) -> None:
    """pytest -v names each test as it starts; with no JUnit XML (pytest killed at the step's
    limit) the summary names the last one started."""
    log = os.path.join(tmp_path, "steps.log")
    with open(log, "w", encoding="utf-8") as f:
        f.write("===== tests: python -m pytest -v ... (limit 150 s)\n")
        f.write("tests/test_cuda_graphs.py::test_replays_never_sync PASSED    [  4%]\n")
        f.write("tests/test_mbpo.py::test_cuda_compiled_run ")  # (killed while it ran)
    assert last_test(log) == {"last_started": "tests/test_mbpo.py::test_cuda_compiled_run"}
