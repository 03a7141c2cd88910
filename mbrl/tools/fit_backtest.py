"""How well the time-left estimate's model-fit rule (``mbrl.runtime.eta``) foresaw recorded
runs' later fits: at a point in a run, the rule is fed the fits made so far (as the training
run's estimate is) and projects the row-epochs (rows x epochs) of every later fit the run
then made, on the rows each really had; that is set against the row-epochs they took. Time is
rows x epochs x the seconds per row-epoch, whose rate holds (docs/usage.md): this is the part
of the estimate that must be foreseen.

A point is ``n8`` (after the run's eighth fit after the first) or ``10k`` (after the fits up to
env step 10 000); a run is counted at a point only if at least :data:`AHEAD` fits came after.
"""

from __future__ import annotations

import json
import os
import statistics
import tarfile
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from mbrl.config import Config
from mbrl.runtime.eta import Work, plateau
from mbrl.runtime.validate import validate

AHEAD = 8  # fits after a point, at least, for a run to count there


@dataclass(frozen=True)
class Fit:
    """One model phase's fit, as its metrics line logged it."""

    step: int
    rows: int
    epochs: int


@dataclass(frozen=True)
class Recorded:
    """One recorded run: its name in the bundle, config and fits in order."""

    name: str
    cfg: Config
    fits: list[Fit]


def bundle_runs(path: str) -> list[Recorded]:
    """The model-based runs of a seeds bundle (``metrics.tar.gz``: runs/<variant>/<seed>/ with
    config.yaml and metrics.jsonl), in name order."""
    out = []
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        for name in sorted(n for n in members if n.endswith("/metrics.jsonl")):
            folder = os.path.dirname(name)
            config = members.get(f"{folder}/config.yaml")
            if config is None:
                continue
            rows = [json.loads(line) for line in _text(tar, members[name]).splitlines()]
            fits = [
                Fit(r["step"], int(r["model/train_rows"]), int(r["model/epochs"]))
                for r in rows
                if "model/epochs" in r
            ]
            if fits:
                raw = OmegaConf.create(_text(tar, config))
                assert isinstance(raw, DictConfig)  # (a run's config.yaml is a mapping)
                raw.device, raw.resume = "cpu", None
                run = folder.removeprefix("runs/")
                out.append(Recorded(run, validate(raw), fits))
    return out


def _text(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    f = tar.extractfile(member)
    assert f is not None  # (a regular file)
    return f.read().decode("utf-8")


def parse_point(point: str) -> tuple[str, int]:
    """``n8`` -> ("n", 8); ``10k`` -> ("k", 10000)."""
    try:
        if point.startswith("n"):
            return "n", int(point[1:])
        if point.endswith("k"):
            return "k", int(point[:-1]) * 1000
    except ValueError:
        pass
    raise ValueError(f"point {point!r}: say n<fits after the first> (n8) or <thousands>k (10k)")


def split_at(run: Recorded, point: str) -> int | None:
    """How many of the run's fits (the first included) come before ``point`` (``n8``: eight
    after the first; ``10k``: those up to step 10 000); None where fewer than :data:`AHEAD`
    come after it."""
    kind, value = parse_point(point)
    made = value + 1 if kind == "n" else sum(f.step <= value for f in run.fits)
    return made if made >= 2 and len(run.fits) - made >= AHEAD else None


def projected_error(run: Recorded, made: int) -> float:
    """The rule's row-epochs for the run's fits after its first ``made``, over what they took,
    less 1 (+0.10: the rule foresaw 10 % more than the fits took)."""
    work = Work()
    for fit in run.fits[:made]:
        work.model_phase(_metrics(fit), rewarder=False)
    epochs, cap = work.epochs(), run.cfg.model.max_epochs
    settled, rest = plateau(run.cfg, epochs), run.fits[made:]
    foreseen = 0.0
    for ahead, fit in enumerate(rest):  # (as mbrl.runtime.eta's time_left counts them)
        n = epochs.later(ahead, settled)
        foreseen += fit.rows * (n if cap is None else min(n, cap))
    took = sum(f.rows * f.epochs for f in rest)
    return foreseen / took - 1


def _metrics(fit: Fit) -> dict[str, float]:
    """What :meth:`Work.model_phase` reads of a model phase (its rollouts do not matter here)."""
    return {
        "model/epochs": fit.epochs,
        "model/train_rows": fit.rows,
        "rollout/start_states": 0,
        "rollout/length": 0,
    }


def table(groups: dict[str, list[Recorded]], points: list[str]) -> str:
    """One markdown row per group and point: runs counted, the median error, its range."""
    lines = ["| runs | point | n | median | range |", "|---|---|---|---|---|"]
    for label, runs in groups.items():
        for point in points:
            errors = []
            for run in runs:
                made = split_at(run, point)
                if made is not None:
                    errors.append(projected_error(run, made))
            if errors:
                mid, spread = statistics.median(errors), f"{min(errors):+.0%} to {max(errors):+.0%}"
                lines.append(f"| {label} | {point} | {len(errors)} | {mid:+.0%} | {spread} |")
    return "\n".join(lines)
