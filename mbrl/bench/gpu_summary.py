"""The GPU check's output folder: ``summary.json`` and ``summary.txt`` (each step's outcome
and every figure the steps' files hold), and the limits on what a GPU lease gives back."""

from __future__ import annotations

import ast
import json
import os
import xml.etree.ElementTree as ElementTree
from typing import Any

MEASURED = ("versions", "sac", "model")  # steps that write DIR/<step>.json themselves
MAX_FILES, MAX_BYTES, MAX_DEPTH = 8, 16 * 2**20, 2  # what comes back from a GPU lease


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
    if "graph_captured" not in r:
        return ""
    return f"; graph captured: {'yes' if r['graph_captured'] else 'no'}"


def profile_lines(prof: dict[str, Any]) -> list[str]:
    if not prof:
        return []
    shares = ", ".join(
        f"{r['phase']} {100 * r['share']:.0f} %" for r in prof["phases"] if r["share"] >= 0.01
    )
    warm_s = ", ".join(f"{k} {v:.1f} s" for k, v in prof.get("compile_warmup_s", {}).items())
    return [f"profile window ({prof['wall_seconds']:.0f} s; compiled: {warm_s}): {shares}"]
