"""What ``scripts/seeds.py`` reports: per variant and evaluated env step, the evaluation
return's mean ± std over seeds, how many seeds reached that step, and how many of those
evaluations stood still; a plot of each variant's band; the throughput of each invocation;
and a small bundle of the runs' metrics.

A *stand-still* evaluation is a policy that keeps the body upright without moving for the
alive bonus: its mean episode length is the env's limit and its return is within
``STILL_TOLERANCE`` of the alive bonus times that length (Hopper: ~1000 over 1000 steps).
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass, field

import numpy as np

from mbrl.envs import episode_limit
from mbrl.envs.make import alive_bonus
from mbrl.tools.plotting import Reference, Run, Setting, load_run, plot_curves, sample_std
from mbrl.tools.seed_speed import speed_lines

STILL_TOLERANCE = 0.05  # |return - bonus x length| <= 5 % of bonus x length
RETURN, LENGTH = "eval/return_mean", "eval/episode_length_mean"
REPORT_FILES = ("summary.md", "summary.json", "curves.png", "curves.svg", "metrics.tar.gz")


@dataclass
class Cell:
    """One variant at one evaluated step: the seeds' returns and stand-still flags."""

    returns: list[float] = field(default_factory=list)
    still: list[bool] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.returns)

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        """The sample standard deviation over seeds (ddof 1; 0 for one seed)."""
        return sample_std(self.returns)


def stands_still(ret: float, length: float, limit: int, bonus: float | None) -> bool:
    """An evaluation whose episodes all ran to the limit for about the alive bonus alone."""
    if bonus is None or length < limit:
        return False
    return abs(ret - bonus * length) <= STILL_TOLERANCE * bonus * length


def _env_of(run: Run) -> tuple[int, float | None]:
    """(episode limit, alive bonus) of the run's env, from its config.yaml."""
    name, version = str(run.config["env.name"]), run.config.get("env.version")
    steps = run.config.get("env.max_episode_steps")
    ver = None if version is None else str(version)
    limit = episode_limit(name, ver, None if steps is None else int(str(steps)))
    return limit, alive_bonus(name, ver)


def cells(runs: list[Run]) -> dict[int, Cell]:
    """Evaluated step -> the cell of these runs (the seeds of one variant)."""
    out: dict[int, Cell] = {}
    for run in runs:
        limit, bonus = _env_of(run)
        for row in run.rows:
            if row.get(RETURN) is None:
                continue
            cell = out.setdefault(int(row["step"]), Cell())
            cell.returns.append(float(row[RETURN]))
            cell.still.append(stands_still(row[RETURN], row.get(LENGTH, 0.0), limit, bonus))
    return dict(sorted(out.items()))


def _cell_text(cell: Cell | None) -> str:
    if cell is None or cell.n == 0:
        return ""
    return f"{cell.mean:.0f} ± {cell.std:.0f} (n={cell.n}, still {sum(cell.still)})"


def table(settings: list[Setting], reference: Reference | None = None) -> str:
    """A markdown table: a row per evaluated step, a column per variant (and the reference,
    its mean ± std at the same step, when given)."""
    per = [cells(s.runs) for s in settings]
    steps = sorted({k for c in per for k in c})
    head = ["env steps", *(s.label for s in settings)]
    if reference is not None:
        head.append(f"{reference.label} (published)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for step in steps:
        row = [f"{step:,}", *(_cell_text(c.get(step)) for c in per)]
        if reference is not None:
            row.append(_reference_text(reference, step))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _reference_text(ref: Reference, step: int) -> str:
    """The reference at ``step`` (interpolated; its points lie a few steps off a round
    number, e.g. 6019, so a step up to 50 before its first point takes that point)."""
    if step < ref.steps[0] - 50 or step > ref.steps[-1]:
        return ""
    mean, std = np.interp(step, ref.steps, ref.mean), np.interp(step, ref.steps, ref.std)
    return f"{mean:.0f} ± {std:.0f}"


def throughput(invocations: list[dict[str, object]]) -> list[str]:
    """One line per invocation of the command: its processes, the env steps its runs
    advanced per second of its wall time together, and per process (median)."""
    lines = []
    for i, inv in enumerate(invocations, start=1):
        runs = inv["runs"]
        assert isinstance(runs, dict)
        wall = float(str(inv["end"])) - float(str(inv["start"]))
        done = [(r["after"] - r["before"], r["seconds"]) for r in runs.values() if r["seconds"]]
        total = sum(d for d, _ in done)
        each = float(np.median([d / s for d, s in done])) if done else 0.0
        lines.append(
            f"invocation {i}: {inv['procs']} processes on {inv['device']}, "
            f"{len(done)} runs, {total:,} env steps in {wall:,.0f} s: "
            f"{total / max(wall, 1e-9):,.1f} env steps/s together, "
            f"{each:,.1f} per process (median)"
        )
    return lines


def solo_rate(invocations: list[dict[str, object]]) -> str:
    """The rate of one process alone, from an invocation with one process, if any."""
    alone = [inv for inv in invocations if inv["procs"] == 1]
    if not alone:
        return "one process alone: not measured (an invocation with --procs 1 measures it)"
    lines = throughput(alone)
    return "one process alone: " + lines[-1].split(": ", 1)[1]


def write_report(
    out: str,
    settings: list[Setting],
    invocations: list[dict[str, object]],
    reference: Reference | None,
    header: str,
) -> list[str]:
    """summary.md, summary.json, curves.png/.svg and metrics.tar.gz in ``out``, each written
    whole to a temporary name first (a report killed half-way leaves the previous one)."""
    os.makedirs(out, exist_ok=True)
    md = "\n\n".join(
        [
            header,
            table(settings, reference),
            "Cells: mean ± sample std of the evaluation return over the seeds that reached "
            f"the step (n), and how many of those evaluations stood still (mean episode "
            f"length at the env's limit, return within {STILL_TOLERANCE:.0%} of the alive "
            "bonus times that length).",
            "\n".join(
                [*throughput(invocations), solo_rate(invocations), *speed_lines(invocations)]
            ),
        ]
    )
    _atomic_text(os.path.join(out, "summary.md"), md + "\n")
    data = {
        s.label: {
            str(step): {"mean": c.mean, "std": c.std, "n": c.n, "still": sum(c.still)}
            for step, c in cells(s.runs).items()
        }
        for s in settings
    }
    summary = {"variants": data, "invocations": invocations}
    _atomic_text(os.path.join(out, "summary.json"), json.dumps(summary, indent=1) + "\n")
    written = [os.path.join(out, "summary.md"), os.path.join(out, "summary.json")]
    if any(s.runs for s in settings):
        written += plot_curves(settings, os.path.join(out, "curves.png"), RETURN, reference)
    written.append(bundle(out, [r for s in settings for r in s.runs]))
    return written


def bundle(out: str, runs: list[Run]) -> str:
    """metrics.tar.gz: each run's metrics.jsonl, config.yaml and command-line overrides,
    under its path relative to the common folder of the runs."""
    path = os.path.join(out, "metrics.tar.gz")
    top = os.path.commonpath([r.path for r in runs]) if runs else out
    with tarfile.open(path + ".tmp", "w:gz") as tar:
        for run in runs:
            for rel in ("metrics.jsonl", "config.yaml", ".hydra/overrides.yaml"):
                file = os.path.join(run.path, rel)
                if os.path.isfile(file):
                    tar.add(file, arcname=os.path.relpath(file, os.path.dirname(top)))
    os.replace(path + ".tmp", path)
    return path


def _atomic_text(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def load_settings(variants: list[tuple[str, list[str]]]) -> list[Setting]:
    """(label, run folders) per variant -> plotting Settings of the folders that have
    metrics (runs not yet started are left out)."""
    settings = []
    for label, paths in variants:
        runs = [load_run(p) for p in paths if os.path.isfile(os.path.join(p, "metrics.jsonl"))]
        settings.append(Setting(label, runs))
    return settings
