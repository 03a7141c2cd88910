"""The first command for a GPU machine: what runs, how fast, and where the time goes, in one
command that finishes within ~9 minutes on one H100.

    python3 scripts/gpu_check.py --out DIR [--device cuda] [--budget 530] [--steps sac,fit,...]

Steps, in this order, each in its own process under its own time limit (a step that fails or
runs out of time is reported and the next one starts):

1. ``sac``      the 20-update SAC block: eager vs compiled vs CUDA-graphed, amp off vs bf16
2. ``fit``      model-fit samples/s (flow, Gaussian: eager vs graphed), rollout transitions/s
3. ``tests``    the CUDA tests (``pytest -k cuda``: graphed block = eager updates, no syncs, ...)
4. ``profile``  a short profiling window of Hopper (``profile=true profile.trace=false``)
5. ``warmup``   compile warm-up of the SAC update and the fit steps, inductor cache cold / warm

DIR gets three files: ``summary.txt`` (read this first), ``summary.json`` (every figure) and
``steps.log`` (each step's output). Peak GPU memory is in the sac and fit steps' figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMITS = {"sac": 150, "fit": 110, "tests": 150, "profile": 90, "warmup": 100}  # seconds


def commands(device: str, work: str) -> dict[str, list[str]]:
    py = sys.executable
    measure = [py, "-m", "mbrl.tools.gpu_check"]
    return {
        "sac": [*measure, "sac", work, device],
        "fit": [*measure, "fit", work, device],
        "tests": [
            *(py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda", "tests"),
            f"--junitxml={os.path.join(work, 'tests.xml')}",
        ],
        "profile": [
            py,
            os.path.join(ROOT, "scripts", "train.py"),
            "env=hopper",
            f"device={device}",
            "profile=true",
            "profile.trace=false",
            "logger.progress=false",
            f"hydra.run.dir={os.path.join(work, 'profile_run')}",
        ],
        "warmup": [*measure, "warmup", work, device],
    }


def run_step(name: str, cmd: list[str], limit: float, log: Any) -> dict[str, Any]:
    """Run one step; its output goes to the log. Returns its outcome and seconds."""
    log.write(f"\n===== {name}: {' '.join(cmd)} (limit {limit:.0f} s)\n")
    log.flush()
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    try:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                              timeout=limit)  # fmt: skip
        outcome = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        outcome = f"stopped at its {limit:.0f} s limit"
    seconds = time.perf_counter() - t0
    log.write(f"===== {name}: {outcome} after {seconds:.0f} s\n")
    log.flush()
    return {"outcome": outcome, "seconds": seconds}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_check"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--budget", type=float, default=530.0, help="seconds for all steps")
    p.add_argument("--steps", default=",".join(LIMITS), help=f"a subset of {','.join(LIMITS)}")
    args = p.parse_args()
    steps = [s for s in args.steps.split(",") if s]
    if bad := [s for s in steps if s not in LIMITS]:
        p.error(f"unknown step(s) {bad}; choose from {', '.join(LIMITS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here")
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    summary: dict[str, Any] = {"machine": machine(args.device), "steps": {}}
    with (
        tempfile.TemporaryDirectory() as work,
        open(os.path.join(args.out, "steps.log"), "w", encoding="utf-8") as log,
    ):
        cmds = commands(args.device, work)
        for name in steps:
            left = args.budget - (time.perf_counter() - start)
            if left < 20:
                summary["steps"][name] = {"outcome": "not run: the budget was spent", "seconds": 0}
                continue
            summary["steps"][name] = run_step(name, cmds[name], min(LIMITS[name], left), log)
            summary.update(read_results(name, work))
    summary["seconds"] = time.perf_counter() - start
    with open(os.path.join(args.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, default=str)
    text = summary_text(summary)
    with open(os.path.join(args.out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(text)


def machine(device: str) -> str:
    what = f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}"
    if device == "cuda" and torch.cuda.is_available():
        what += f", {torch.cuda.get_device_name(0)}"
    return what


def read_results(name: str, work: str) -> dict[str, Any]:
    """A step's figures: its JSON (measuring steps), or the profile window's phase table."""
    if name == "profile":
        path = os.path.join(work, "profile_run", "log", "profile", "phases.json")
        key = "profile"
    else:
        path, key = os.path.join(work, f"{name}.json"), ""
    if name == "tests":
        return {"tests": test_counts(os.path.join(work, "tests.xml"))}
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if key:
        return {key: data}
    peak = data.pop("peak_gpu_mb", None)
    if peak is not None:
        data[f"peak_gpu_mb_{name}"] = peak
    return data


def test_counts(path: str) -> dict[str, int]:
    """passed / failed / skipped from pytest's JUnit XML (empty if it wrote none)."""
    if not os.path.isfile(path):
        return {}
    import xml.etree.ElementTree as ElementTree

    suite = ElementTree.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    failed = n["failures"] + n["errors"]
    return {"passed": n["tests"] - failed - n["skipped"], "failed": failed, "skipped": n["skipped"]}


def summary_text(s: dict[str, Any]) -> str:
    lines = [f"FlowMBPO GPU check on {s['machine']}: {s['seconds']:.0f} s"]
    for name, r in s["steps"].items():
        lines.append(f"  step {name:<8} {r['outcome']} ({r['seconds']:.0f} s)")
    if s.get("tests"):
        t = s["tests"]
        lines.append(
            f"CUDA tests: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"
        )
    for name, r in s.get("sac", {}).items():
        lines.append(
            f"SAC 20-update block, {name:<22} {r['updates_per_s']:>9.1f} updates/s"
            f" ({r['time_vs_first']:.2f}x eager fp32's time; warm-up {r['warmup_s']:.1f} s)"
        )
    for name, r in s.get("model_fit", {}).items():
        lines.append(f"model fit, {name:<33} {r['samples_per_s']:>11,.0f} samples/s")
    for name, v in s.get("rollout_transitions_per_s", {}).items():
        lines.append(f"rollout (100 000 rows), {name:<20} {v:>11,.0f} transitions/s")
    for when, w in s.get("compile_warmup_s", {}).items():
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in w.items())
        lines.append(f"compile warm-up, inductor cache {when}: {parts}")
    prof = s.get("profile")
    if prof:
        shares = ", ".join(
            f"{r['phase']} {100 * r['share']:.0f} %" for r in prof["phases"] if r["share"] >= 0.01
        )
        lines.append(f"profile window ({prof['wall_seconds']:.0f} s): {shares}")
    for key in ("peak_gpu_mb_sac", "peak_gpu_mb_fit"):
        if s.get(key) is not None:
            lines.append(f"peak GPU memory ({key.rsplit('_', 1)[-1]} step): {s[key]:,.0f} MB")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
