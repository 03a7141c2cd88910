"""What ``scripts/seeds.py`` reports (docs/usage.md): its tables (seed_tables.py), a plot of
each variant's band, the throughput of each invocation, and a small bundle of the runs' metrics.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import yaml

from mbrl.runtime import runlock
from mbrl.runtime.inert_settings import Warned
from mbrl.runtime.utils import write_atomic
from mbrl.tools.figures import plot_curves
from mbrl.tools.plotting import Reference, Run, Setting, load_run
from mbrl.tools.seed_runs import ROOT, Job, Variant
from mbrl.tools.seed_speed import speed_lines
from mbrl.tools.seed_tables import (
    RETURN,
    STILL_TOLERANCE,
    cells,
    paired,
    paired_counts,
    paired_text,
    smoothed_table,
    step_table,
)
from mbrl.tools.stats import CONFIDENCE, COVERAGE, INTERVAL_SEEDS, RESAMPLES, SMOOTH_WINDOW

CAMPAIGN = "seeds.json"  # a scripts/seeds.py campaign's folder holds it: its variants' order


def campaign_variants(folder: str) -> list[Variant] | None:
    """The variants of the seeds.py campaign in ``folder``, in its order; None where
    ``folder`` holds no campaign's manifest."""
    path = os.path.join(folder, CAMPAIGN)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return [Variant(tuple(v)) for v in json.load(f).get("variants", [])]


def campaign_order(settings: list[Setting], folder: str) -> list[Setting]:
    """``settings`` in the order of the variants of the seeds.py campaign in ``folder`` (its
    report's order, so that a paired difference has the report's sign); as they are where
    ``folder`` is no campaign. A setting's place is its first run's variant folder
    (``runs/<variant>/seed_<k>``); one outside the campaign's folders keeps its order, last."""
    variants = campaign_variants(folder)
    if variants is None:
        return settings
    folders = [v.folder for v in variants]

    def rank(s: Setting) -> int:
        variant = os.path.basename(os.path.dirname(os.path.abspath(s.runs[0].path)))
        return folders.index(variant) if variant in folders else len(folders)

    return sorted(settings, key=rank)  # (stable)


# After the paired table's note, where the env can stand still (seed_tables.paired_counts)
COUNTS_NOTE = (
    " Then, per variant, a table of its full-length and still evaluations by seed over the same "
    "steps beside the first's, with the per-seed difference and the two-sided p of an exact "
    "paired sign-flip test (the seed is the unit: one seed's evaluations are not independent "
    "draws)."
)


def tables(settings: list[Setting], reference: Reference | None = None) -> str:
    """The report's tables in markdown, each after a line that says what its cells are."""
    ci = f"[{CONFIDENCE:.0%} bootstrap interval of the mean] (n)"
    still = (
        "; how many of those evaluations were *full-length* (every episode ran the env's "
        f"limit) and how many stood *still* (full-length, for a return within "
        f"{STILL_TOLERANCE:.0%} of the alive bonus times that length)"
    )
    counted = any(c.counts() is not None for s in settings for c in cells(s.runs).values())
    parts = [
        f"Evaluation return per step: mean ± sample std over the seeds that reached it {ci}"
        + (still if counted else "")
        + ".",
        step_table(settings),
        f"Smoothed, to sit beside a published curve that was smoothed (compare it with these "
        f"columns, not with the raw ones above): each seed's mean over its last {SMOOTH_WINDOW} "
        f"evaluations after the random steps (fewer at the first {SMOOTH_WINDOW - 1}), then "
        f"mean ± std over seeds {ci}"
        + ("; the published column is that curve's mean ± std." if reference else "."),
        smoothed_table(settings, reference),
    ]
    if len(settings) > 1:
        parts += [
            "Paired by seed, each variant minus the first: per step, the differences over the "
            f"seeds both evaluated there after the random steps, mean ± std {ci}."
            + (COUNTS_NOTE if paired_counts(settings) else ""),
            paired_text(settings),
        ]
    parts.append(
        f"Intervals: percentile bootstrap of the mean ({RESAMPLES:,} resamples), from "
        f"{INTERVAL_SEEDS} seeds on (at 3 or fewer it would be the seeds' range, whatever "
        "they are). At few seeds it is narrower than 95 %: on normal data it held the mean in "
        + ", ".join(
            f"{100 * c:.0f} % of samples at n={n}" if i == 0 else f"{100 * c:.0f} % at n={n}"
            for i, (n, c) in enumerate(x for x in COVERAGE.items() if x[0] > 3)
        )
        + ": read it with n."
    )
    return "\n\n".join(parts)


def _json(settings: list[Setting]) -> dict[str, object]:
    """summary.json's numbers: per variant and step (and per pair of variants)."""
    data: dict[str, object] = {}
    for s in settings:
        per: dict[str, object] = {}
        for step, c in cells(s.runs).items():
            entry = c.summary().as_dict()
            counts, smooth = c.counts(), c.smoothed()
            if counts is not None:
                entry.update(full=counts[0], still=counts[1])
            if smooth is not None:
                entry["smoothed"] = smooth.as_dict()
            per[str(step)] = entry
        data[s.label] = per
    pairs = {}
    for label, (diffs, found) in paired(settings).items():
        pairs[label] = {str(k): d.as_dict() for k, d in diffs.items()}
        if found is not None:
            pairs[label]["overall"] = found[0].as_dict() | {
                "first": found[1],
                "last": found[2],
                "sign_flip_p": found[3],
            }
    base = settings[0].label
    for label, found_counts in paired_counts(settings).items():  # seed -> [full, still]
        pairs[f"{label} − {base}"]["counts"] = {
            "steps": found_counts.steps,
            base: {str(k): list(v) for k, v in found_counts.first.items()},
            label: {str(k): list(v) for k, v in found_counts.other.items()},
        }
    return {"variants": data, "paired": pairs}


def still_running(paths: list[str]) -> str:
    """A note (its line, or "") on the runs a live process is writing now: their last
    evaluations are not their last."""
    live = [p for p in paths if runlock.held_by_another(p)]
    if not live:
        return ""
    return f"note: still being written by a live process, shown as far as now: {', '.join(live)}\n"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "es" if word.endswith("s") else "s")


def _rates(inv: dict[str, Any]) -> tuple[int, int, float, float]:
    """(runs that advanced, env steps they advanced, wall seconds, the median run's env steps
    per second of its own time)."""
    done = [(r["after"] - r["before"], r["seconds"]) for r in inv["runs"].values() if r["seconds"]]
    each = float(np.median([d / s for d, s in done])) if done else 0.0
    wall = inv["end"] - inv["start"]
    return len(done), sum(d for d, _ in done), wall, each


def throughput(invocations: list[dict[str, Any]]) -> list[str]:
    """One line per invocation of the command: its processes, the env steps its runs
    advanced per second of its wall time together, and per run (median)."""
    lines = []
    for i, inv in enumerate(invocations, start=1):
        runs, total, wall, each = _rates(inv)
        batch = inv.get("batch", 1)
        seeds = f" ({batch} seeds each, batched)" if batch > 1 else ""
        load = f"; {text}" if (text := _load(inv)) else ""
        lines.append(
            f"invocation {i}: {plural(inv['procs'], 'process')}{seeds} on "
            f"{inv['device']}, {plural(runs, 'run')}, {total:,} env steps in {wall:,.0f} s: "
            f"{total / max(wall, 1e-9):,.1f} env steps/s together, "
            f"{each:,.1f} per run (median){load}"
        )
    return lines


def _load(inv: dict[str, Any]) -> str:
    """The machine's 1-minute load average over an invocation (sampled at each report; an
    invocation recorded before it was kept: nothing), which says whether its runs had the
    machine to themselves."""
    load = inv.get("load")
    return f"load average {np.mean(load):.1f} on {inv['cores']} cores" if load else ""


def solo_rate(invocations: list[dict[str, Any]]) -> str:
    """The rate of one process alone: the median run's rate in the last invocation that ran
    one process at a time, if any."""
    alone = [
        i
        for i, inv in enumerate(invocations, start=1)
        if inv["procs"] == 1 and inv.get("batch", 1) == 1
    ]
    if not alone:
        return "one process alone: not measured (an invocation with --procs 1 measures it)"
    inv = invocations[alone[-1] - 1]
    each, load = _rates(inv)[3], _load(inv)
    # (its own process is a load of about its threads: well above that, other work shared it)
    if load and np.mean(inv["load"]) > inv.get("threads", 1) + 0.5:
        name, load = "one process at a time, on a shared machine", f"; {load}"
    else:
        name, load = "one process alone", ""
    return f"{name}: {each:,.1f} env steps/s (invocation {alone[-1]}'s median run{load})"


def write_report(
    out: str,
    settings: list[Setting],
    invocations: list[dict[str, Any]],
    reference: Reference | None,
    header: str,
) -> None:
    """metrics.tar.gz, summary.md, summary.json and curves.png/.svg in ``out``, each written
    whole to a temporary name first (a report killed half-way leaves the previous one); the
    runs' metrics first, what a short-lived machine must bring back whatever follows."""
    os.makedirs(out, exist_ok=True)
    bundle(out, [r for s in settings for r in s.runs])
    parts = [header, tables(settings, reference)]
    if invocations:  # (none: a report over folders this command did not run, e.g. a joint A/B)
        parts.append(
            "\n".join([*throughput(invocations), solo_rate(invocations), *speed_lines(invocations)])
        )
    md = "\n\n".join(parts)
    write_atomic(os.path.join(out, "summary.md"), md + "\n")
    summary = _json(settings) | {"invocations": invocations}
    write_atomic(os.path.join(out, "summary.json"), json.dumps(summary, indent=1) + "\n")
    if any(s.runs for s in settings):
        plot_curves(settings, os.path.join(out, "curves.png"), RETURN, reference)


def bundle(out: str, runs: list[Run]) -> None:
    """metrics.tar.gz: each run's metrics.jsonl, config.yaml and command-line overrides under
    ``runs/<variant>/seed_<N>/``, as a campaign folder holds them (one variant or several):
    ``tar xzf`` into a folder makes a campaign that ``seeds.py --report-only`` reads."""
    path = os.path.join(out, "metrics.tar.gz")
    with tarfile.open(path + ".tmp", "w:gz") as tar:
        for run in runs:
            variant, seed = os.path.split(os.path.normpath(run.path))
            where = os.path.join("runs", os.path.basename(variant), seed)
            for rel in ("metrics.jsonl", "config.yaml", ".hydra/overrides.yaml"):
                file = os.path.join(run.path, rel)
                if os.path.isfile(file):
                    tar.add(file, arcname=os.path.join(where, rel))
    os.replace(path + ".tmp", path)


def load_settings(variants: list[tuple[str, list[str]]]) -> list[Setting]:
    """(label, run folders) per variant -> plotting Settings of the folders that have
    metrics (runs not yet started are left out)."""
    settings = []
    for label, paths in variants:
        runs = [load_run(p) for p in paths if os.path.isfile(os.path.join(p, "metrics.jsonl"))]
        settings.append(Setting(label, runs))
    return settings


def report_only(out: str, report_dir: str, chosen: list[Job], report: Callable[[], None]) -> int:
    """--report-only: the report of the runs that have metrics; none at all is refused before
    anything is written (a wrong folder would otherwise replace a report with an empty one)."""
    have = [j for j in chosen if os.path.isfile(os.path.join(j.path, "metrics.jsonl"))]
    campaign = campaign_variants(out)
    # (a variant of the campaign without metrics yet is reported without them: its runs may
    # be to come; one neither in the campaign nor with runs is a mistake)
    labels = [*(v.label for v in campaign or []), *(j.variant.label for j in have)]
    known = list(dict.fromkeys(labels))
    empty = [v for v in dict.fromkeys(j.variant.label for j in chosen) if v not in known]
    if not have or empty:
        where = os.path.join(out, "runs", "<variant>", "seed_<N>", "metrics.jsonl")
        bare = f"; {out} holds no {CAMPAIGN}: not a campaign's folder" if campaign is None else ""
        what = (
            f"{', '.join(empty)}: no such variant in {out} (its variants: {', '.join(known)})"
            if empty and known
            else f"none of the {len(chosen)} runs asked for has metrics (each run's are read "
            f"from {where}{bare})"
        )
        print(f"error: --report-only: {what}; nothing was written", file=sys.stderr)
        return 2
    report()
    missing = [j.name for j in chosen if j not in have]
    without = f"; without metrics yet: {', '.join(missing)}" if missing else ""
    said = f"wrote the report in {report_dir} ({plural(len(have), 'run')}{without})"
    print(said, file=sys.stderr)
    print(still_running([j.path for j in have]), file=sys.stderr, end="")
    return 0


def report_header(
    overrides: list[str], size: tuple[int, int], at: str, ran: list[str], warns: list[Warned]
) -> str:
    """The report's first lines: the campaign (``size``: seeds, variants), the command, when
    it was written, the commits its runs ran at where they were several (a campaign continued
    across changes), and the settings that cannot act in its runs (their start blocks'
    warnings: a campaign that ends within the random steps learns nothing)."""
    several = (
        f"; its invocations ran at {len(ran)} commits, {', '.join(ran)} (invocations.json says "
        "which ran what)"
        if len(ran) > 1
        else ""
    )
    head = (
        f"# {' '.join(overrides) or 'default config'}: {plural(size[0], 'seed')} x "
        f"{plural(size[1], 'variant')}\n\n"
        f"`python scripts/seeds.py {shlex.join(sys.argv[1:])}`; "  # (as typed: quotes kept)
        f"last written {time.strftime('%Y-%m-%d %H:%M')} at commit {at}{several}"
    )
    if not warns:
        return head
    said = "\n".join(f"- {w.listed()}" for w in warns)
    return f"{head}\n\n**Warnings** (each run's start block gives them too):\n\n{said}"


def campaign_steps(out: str) -> int | None:
    """The env steps a campaign's runs were last taken to (the largest ``total_steps`` of
    their configs; None without a run), for a report's warnings: its own folder's, or an
    extracted bundle's (which has no invocations.json)."""
    totals = []
    for path in glob.glob(os.path.join(out, "runs", "*", "seed_*", "config.yaml")):
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        if isinstance(config, dict) and isinstance(config.get("total_steps"), int):
            totals.append(config["total_steps"])
    return max(totals, default=None)


def load_now() -> list[float]:
    """The machine's 1-minute load average, or nothing where the platform has none."""
    try:
        return [round(os.getloadavg()[0], 2)]
    except (AttributeError, OSError):  # (Windows; a load that cannot be read)
        return []


def commit() -> str:
    """This checkout's commit (``git describe``: ``3f2ccd1``, ``-dirty`` with changes), or
    ``unknown`` outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=7"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
