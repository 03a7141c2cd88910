"""The GPU check's runner (``scripts/gpu_check.py``): each step in a process of its own, in a
session of its own, under its time limit (derived from measured compile times in
docs/benchmarks.md, "On a GPU, run this first"); after every step the output folder's
``summary.json`` and ``summary.txt`` (each step's outcome and every figure the steps' files
hold), within the limits on what a GPU lease gives back."""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from typing import Any

MEASURED = ("versions", "sac", "model")  # steps that write DIR/<step>.json themselves
MAX_FILES, MAX_BYTES, MAX_DEPTH = 8, 16 * 2**20, 2  # what comes back from a GPU lease
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


def write_summary(out: str, summary: dict[str, Any], work: str, seconds: float) -> None:
    """summary.json and summary.txt, each replaced whole: the steps so far and every figure
    their files hold."""
    summary["seconds"] = seconds
    for name in MEASURED:
        summary[name] = read_json(os.path.join(out, f"{name}.json"))
    summary["profile"] = read_json(
        os.path.join(work, "profile_run", "log", "profile", "phases.json")
    )
    summary["tests"] = tests_outcome(os.path.join(work, "tests.xml"))
    if not summary["tests"] and summary["steps"].get("tests", {}).get("outcome") != "running":
        summary["tests"] = last_test(os.path.join(out, "steps.log"))  # (killed: no XML)
    summary["output_problems"] = output_problems(out)
    replace(os.path.join(out, "summary.json"), json.dumps(summary, indent=2, default=str))
    replace(os.path.join(out, "summary.txt"), summary_text(summary) + "\n")


def replace(path: str, text: str) -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):  # not written (yet), or cut by a kill
        return {}
    return data if isinstance(data, dict) else {}


def tests_outcome(path: str) -> dict[str, Any]:
    """Counts, failed tests and the slowest from pytest's JUnit XML (empty if it wrote none)."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return {}
    cases = list(root.iter("testcase"))
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skips = {c: s for c in cases if (s := c.find("skipped")) is not None}
    # A module skipped as a whole (pytest.importorskip of a package the machine lacks) is
    # one case named after the module, not a test: counted apart, so that "skipped" counts
    # CUDA tests alone.
    modules = [c for c, s in skips.items() if s.get("message") == "collection skipped"]
    skipped = [c for c in skips if c not in modules]
    name = lambda c: f"{c.get('classname', '')}::{c.get('name', '')}"  # noqa: E731
    slowest = sorted(
        (c for c in cases if c not in modules), key=lambda c: -float(c.get("time", 0))
    )[:5]
    return {
        "passed": len(cases) - len(failed) - len(skipped) - len(modules),
        "failed": len(failed),
        "skipped": len(skipped),
        "modules_skipped": {str(c.get("name")): _skip_reason(c) for c in modules},
        "failed_tests": [name(c) for c in failed],
        "slowest": {name(c): float(c.get("time", 0)) for c in slowest},
    }


def _skip_reason(case: ElementTree.Element) -> str:
    """The reason pytest gave for skipping a module (its text is the tuple (path, line,
    "Skipped: <why>"))."""
    text = case.findtext("skipped") or ""
    try:
        why = str(ast.literal_eval(text)[-1])
    except (ValueError, SyntaxError, TypeError, IndexError):
        return text
    return why.removeprefix("Skipped: ")


def last_test(log_path: str) -> dict[str, Any]:
    """The last test ``pytest -v`` named in the log: with no JUnit XML (pytest killed at the
    step's limit), the test that was running."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            names = [line.split()[0] for line in f if line.startswith("tests/") and "::" in line]
    except OSError:
        return {}
    return {"last_started": names[-1]} if names else {}


def output_problems(out: str) -> list[str]:
    """What would not come back from a GPU lease: too many files, too large, too deep."""
    files = []
    for folder, _, names in os.walk(out):
        files += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    problems = [f"{len(files)} files (at most {MAX_FILES} come back)"] * (len(files) > MAX_FILES)
    for path in files:
        rel = os.path.relpath(path, out)
        if os.path.getsize(path) > MAX_BYTES:
            problems.append(f"{rel} is over 16 MiB")
        if rel.count(os.sep) > MAX_DEPTH:
            problems.append(f"{rel} is more than {MAX_DEPTH} folders deep")
    return problems


def trim(path: str, limit: int = MAX_BYTES - 2**20) -> None:
    """Keep a log under the size that comes back: its first and last parts."""
    size = os.path.getsize(path)
    if size <= limit:
        return
    with open(path, "rb") as f:
        head = f.read(limit // 4)
        f.seek(size - limit // 2)
        tail = f.read()
    with open(path, "wb") as f:
        f.write(head + f"\n[... {size - len(head) - len(tail):,} bytes cut ...]\n".encode() + tail)


def summary_text(s: dict[str, Any]) -> str:
    lines = [headline(s)]
    for name, r in s["steps"].items():
        limit = f" of {r['limit']:.0f} s" if r.get("limit") else ""
        lines.append(f"  step {name:<9} {r['outcome']} ({r['seconds']:.0f} s{limit})")
    for name, r in s.get("sac", {}).get("sac", {}).items():
        lines.append(
            f"SAC 20-update block, {name:<27} {r['updates_per_s']:>10,.1f} updates/s  "
            f"({warm(r)}ran: {r['ran']}{captured(r)})"
        )
    model = s.get("model", {})
    for name, r in model.get("fit", {}).items():
        lines.append(
            f"fit epoch, {name:<37} {r['rows_per_s']:>10,.0f} rows/s  ({r['samples_per_s']:,.0f}"
            f" samples/s; {warm(r)}ran: {r['ran']}{captured(r)})"
        )
    for name, r in model.get("rollout", {}).items():
        lines.append(f"rollout step, {name:<34} {r['transitions_per_s']:>10,.0f} transitions/s")
    lines += profile_lines(s.get("profile") or {})
    t = s.get("tests") or {}
    if "last_started" in t:
        lines.append(f"CUDA tests: no report; the last test started: {t['last_started']}")
    elif t:
        lines.append(
            f"CUDA tests: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"
        )
        lines += [f"  failed: {name}" for name in t["failed_tests"]]
        for module, why in t.get("modules_skipped", {}).items():
            lines.append(f"  module skipped as a whole: {module} ({why})")
    for key, mb in {**s.get("sac", {}).get("memory", {}), **model.get("memory", {})}.items():
        lines.append(f"peak GPU memory so far ({key}): {mb:,.0f} MB")
    lines += [f"output: {p}" for p in s.get("output_problems", [])]
    return "\n".join(lines)


def headline(s: dict[str, Any]) -> str:
    v = s.get("versions", {})
    ver, dev = v.get("versions", {}), v.get("device", {})
    where = dev.get("name") or s["device"]
    if dev.get("capability"):
        where += f" ({dev['capability']}, {dev['memory_gib']} GiB)"
    text = f"FlowMBPO GPU check on {where}: {s['seconds']:.0f} s of {s['budget_s']:.0f} s"
    if ver:
        cuda = f" (CUDA {ver['cuda']})" if ver.get("cuda") else ""
        strict = "on" if ver["strict"] else "off"
        text += (
            f"\n  torch {ver['torch']}{cuda}, triton {ver['triton']}, Python {ver['python']}, "
            f"numpy {ver['numpy']}; commit {ver['commit']}; strict mode {strict}"
        )
    return text


def warm(r: dict[str, Any]) -> str:
    return f"warm-up {r['warmup_s']:.1f} s; " if r.get("warmup_s") else ""


def captured(r: dict[str, Any]) -> str:
    got = r.get("graph_captured")
    return "" if got is None else f"; graph captured: {'yes' if got else 'no'}"


def profile_lines(prof: dict[str, Any]) -> list[str]:
    if not prof:
        return []
    shares = ", ".join(
        f"{r['phase']} {100 * r['share']:.0f} %" for r in prof["phases"] if r["share"] >= 0.01
    )
    warm_s = ", ".join(f"{k} {v:.1f} s" for k, v in prof.get("compile_warmup_s", {}).items())
    return [f"profile window ({prof['wall_seconds']:.0f} s; compiled: {warm_s}): {shares}"]
