"""The GPU check's runner (``scripts/gpu_check.py``): each step in a process of its own, in a
session of its own, under its time limit; the summary after every step (``gpu_summary.py``).
The steps' limits are derived from measured compile times in docs/benchmarks.md ("On a GPU,
run this first"): a cold compile on the GPU machine taken as 1.5x the quiet 2-core CPU's."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from mbrl.bench.gpu_summary import MEASURED, summary_text, trim, write_summary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET = 540.0  # seconds for the whole check: 9 minutes
LIMITS: dict[str, float | None] = {  # seconds per step (docs/benchmarks.md); None: the rest
    "versions": 30,
    "sac": 120,
    "model": 140,
    "profile": 100,
    "tests": None,
}
TEST_TIMEOUT = 90  # seconds per test (pytest-timeout): a cold compile of a test's networks
# --device cpu checks the check itself: inductor's C++ kernels compile on a few (shared)
# cores, several times slower than the GPU machine's Triton kernels; limits and budget grow
# by this factor there (a cold SAC compile took 48-85 s on the shared 2-core CPU).
CPU_SLOWER = 4
# --quick: the first model phase at 250 env steps (mbpo.model_train_freq), small rollouts
QUICK_PROFILE = ["algorithm.init_steps=250", "profile.updates=20", "rollout.batch_size=2000"]


def commands(device: str, out: str, work: str, quick: bool) -> dict[str, list[str]]:
    py = sys.executable
    measure = [py, "-m", "mbrl.bench.gpu_steps"]
    flag = ["--quick"] if quick else []
    return {
        **{name: [*measure, name, out, device, *flag] for name in MEASURED},
        "profile": [
            *(py, os.path.join(ROOT, "scripts", "train.py"), "env=hopper", f"device={device}"),
            *("profile=true", "profile.trace=false", "logger.progress=false"),
            f"hydra.run.dir={os.path.join(work, 'profile_run')}",
            *(QUICK_PROFILE if quick else []),
        ],
        "tests": [
            *(py, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-m", "cuda"),
            *(f"--timeout={TEST_TIMEOUT}", f"--junitxml={os.path.join(work, 'tests.xml')}"),
            os.path.join(ROOT, "tests"),
        ],
    }


def step_env(name: str, work: str) -> dict[str, str]:
    env = {
        **os.environ,
        "FLOWMBPO_STRICT": "1",
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(work, "inductor"),
        "PYTHONUNBUFFERED": "1",
        # Nothing in the check renders; egl needs libEGL, which a bare GPU image may lack.
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "disable"),
    }
    if name == "profile":
        env["TEARDOWN_CUPTI"] = "0"  # CUDA graphs under the profiler's CUPTI: a crash history
    return env


def run_step(
    name: str,
    cmd: list[str],
    limit: float,
    log_path: str,
    env: dict[str, str] | None = None,
    started: Callable[[int], None] = lambda pid: None,
) -> dict[str, Any]:
    """Run one step in a session of its own, its output appended to the log; past ``limit``
    seconds its whole process group is killed. ``started(pid)`` is told the process (and
    group) id once it runs. Returns its outcome and seconds."""
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n===== {name}: {' '.join(cmd)} (limit {limit:.0f} s)\n")
        log.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
        started(proc.pid)
        try:
            code = proc.wait(timeout=limit)
            outcome = "ok" if code == 0 else f"failed (exit {code})"
        except subprocess.TimeoutExpired:
            outcome = f"stopped at its {limit:.0f} s limit"
        finally:
            # The whole group, also whatever the step left running: compile workers.
            with contextlib.suppress(ProcessLookupError, PermissionError):  # (the group is gone)
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        seconds = time.perf_counter() - t0
        log.write(f"===== {name}: {outcome} after {seconds:.0f} s\n")
    return {"outcome": outcome, "seconds": seconds, "limit": limit}


def main(description: str) -> None:
    """``scripts/gpu_check.py``'s command line (``description``: its usage text)."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_check"), help="output folder")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument(
        "--budget", type=float, default=None, help=f"seconds for all steps ({BUDGET:.0f})"
    )
    p.add_argument("--steps", default=",".join(LIMITS), help=f"a subset of {','.join(LIMITS)}")
    p.add_argument("--quick", action="store_true", help="small sizes: a test of the check")
    args = p.parse_args()
    steps = [s for s in args.steps.split(",") if s]
    if bad := [s for s in steps if s not in LIMITS]:
        p.error(f"unknown step(s) {bad}; choose from {', '.join(LIMITS)}")
    args.slower = CPU_SLOWER if args.device == "cpu" else 1
    args.budget = BUDGET * args.slower if args.budget is None else args.budget
    if not args.budget > 0:
        p.error(f"--budget {args.budget:g}: it must be a positive number of seconds")
    if args.device == "cuda" and not cuda_available():
        p.error("--device cuda: torch sees no CUDA device here (--device cpu checks the check)")
    os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        run_all(args, steps, work)


def cuda_available() -> bool:
    """Asked in a child: the check's own process never initialises CUDA."""
    ask = [sys.executable, "-c", "import torch; print(torch.cuda.is_available())"]
    return subprocess.run(ask, capture_output=True, text=True).stdout.strip() == "True"


def run_all(args: argparse.Namespace, steps: list[str], work: str) -> None:
    start = time.perf_counter()
    log_path = os.path.join(args.out, "steps.log")
    open(log_path, "w").close()
    cmds = commands(args.device, args.out, work, args.quick)
    summary: dict[str, Any] = {"device": args.device, "budget_s": args.budget, "steps": {}}
    for name in steps:
        left = args.budget - (time.perf_counter() - start)
        fixed = LIMITS[name]
        limit = fixed * args.slower if fixed else left - 5  # (the rest: the summary's seconds)
        if min(limit, left) < 10:
            summary["steps"][name] = {"outcome": "not run: the budget was spent", "seconds": 0}
            continue
        running = summary["steps"][name] = {"outcome": "running", "seconds": 0, "limit": limit}
        write_summary(args.out, summary, work, time.perf_counter() - start)

        def started(pid: int, running: dict[str, Any] = running) -> None:
            running["pid"] = pid  # (a check killed meanwhile leaves this process group)
            write_summary(args.out, summary, work, time.perf_counter() - start)

        r = summary["steps"][name] = run_step(
            name, cmds[name], min(limit, left), log_path, step_env(name, work), started
        )
        trim(log_path)
        write_summary(args.out, summary, work, time.perf_counter() - start)
        print(f"step {name}: {r['outcome']} ({r['seconds']:.0f} s)", flush=True)
    print(summary_text(summary))
