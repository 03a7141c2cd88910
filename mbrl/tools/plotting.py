"""Run folders for ``scripts/plot.py`` and ``scripts/seeds.py``: loading, grouping into settings,
a final-return summary and a published reference curve (the figures: figures.py).

Runs are grouped into *settings* by the config values that differ between them (the seed
aside), so a hydra multirun over ``rollout.max_length=1,5 seed=0,1,2`` gives two settings of
three seeds each.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from mbrl.tools.stats import SMOOTH_WINDOW, summarize, trailing_mean

# Keys that say how a run ran, not what it is: never a setting's label.
IGNORED: tuple[str, ...] = ("seed", "resume", "total_steps", "logger.", "checkpoint.", "eval.")
IGNORED += ("threads", "device", "hydra", "max_minutes", "batch_seeds")  # (seeds.py's budget)
# Config groups: a run picks one file of each (model=flow); its keys follow from the choice.
GROUPS = ("env", "model", "algorithm", "agent")

NOT_PHASES = ("time/wall", "time/paused")  # a log interval's time/ keys that are no phase


@dataclass
class Run:
    path: str
    config: dict[str, object]
    rows: list[dict[str, Any]]  # metrics.jsonl's (numbers, None, and the speed/* texts)
    overrides: dict[str, str] | None = None  # its command line (hydra's overrides.yaml)

    def value(self, key: str) -> object:
        """A key's value in this run: its config's, or for a config group the name of the
        file it picked (``model`` -> ``flow``)."""
        if key in self.config:
            return self.config[key]
        if key in GROUPS:
            return self.config.get(f"{key}.name", (self.overrides or {}).get(key))
        return (self.overrides or {}).get(key)

    def curve(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        pts = [(r["step"], r[metric]) for r in self.rows if r.get(metric) is not None]
        arr = np.array(pts, dtype=float).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]

    def phase_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for r in self.rows:
            for k, v in r.items():
                if k.startswith("time/") and k not in NOT_PHASES and v is not None:
                    out[k[5:]] = out.get(k[5:], 0.0) + float(v)
        return out


@dataclass
class Setting:
    label: str
    runs: list[Run] = field(default_factory=list)


def find_runs(paths: list[str]) -> list[Run]:
    """Every folder under ``paths`` holding a metrics.jsonl (a run, or a sweep of runs)."""
    found: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            raise FileNotFoundError(f"{path!r} is not a folder")
        for root, dirs, files in os.walk(path):
            # (the logs of a run that saved no checkpoint, kept when a new run took its
            # folder: mbrl.runtime.logger.set_aside_logs; no run of their own)
            dirs[:] = [d for d in dirs if not d.startswith("earlier_run_")]
            if "metrics.jsonl" in files:
                found.append(root)
    if not found:
        raise FileNotFoundError(f"no run folder (with metrics.jsonl) under {', '.join(paths)}")
    return [load_run(p) for p in sorted(found)]


def check_runs(runs: list[Run], by: list[str] | None, metric: str) -> set[str]:
    """Raise ValueError (one line) for what would make a plot of ``runs`` wrong or empty:
    runs of several envs (their returns are not on one scale, nor their seeds pairs), a
    ``--by`` key no run has, a ``--metric`` no run logged. Returns the runs' envs."""
    envs: dict[str, list[str]] = {}
    for run in runs:
        envs.setdefault(str(run.config.get("env.name", "?")), []).append(run.path)
    if len(envs) > 1:
        listed = "; ".join(f"env={e}: {len(p)} runs, e.g. {p[0]}" for e, p in sorted(envs.items()))
        raise ValueError(f"the runs are of {len(envs)} envs ({listed}): plot one env at a time")
    known = {k for run in runs for k in run.config} | set(GROUPS)
    for key in by or []:  # (a key every run has as null groups them all: allowed)
        if key not in known and all(run.value(key) is None for run in runs):
            raise ValueError(f"--by {key}: no run has this key{did_you_mean(key, known)}")
    logged = {k for run in runs for r in run.rows for k in r} - {"step", "time"}
    if metric not in logged:
        raise ValueError(
            f"--metric {metric}: no run has logged it{did_you_mean(metric, logged)} (the keys "
            "of metrics.jsonl: docs/usage.md#the-run-folder)"
        )
    if not any(r.get(metric) is not None for run in runs for r in run.rows):
        raise ValueError(f"--metric {metric}: every value logged is null (not finite)")
    return set(envs)


def did_you_mean(word: str, known: set[str]) -> str:
    """``; did you mean a or b?`` (keys that start with ``word``, else close to it, else that
    end with it: return_mean -> eval/return_mean), or ""."""
    close = sorted(k for k in known if k.startswith(word))[:3]
    close = close or difflib.get_close_matches(word, sorted(known), n=3, cutoff=0.6)
    close = close or sorted(k for k in known if k.endswith(word))[:3]
    return f"; did you mean {' or '.join(close)}?" if close else ""


def read_metrics(file: str) -> list[dict[str, Any]]:
    """A metrics.jsonl's rows; a line a kill cut short is left out (a report of a campaign
    whose run was killed mid-write still reads the rest)."""
    rows = []
    with open(file, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def load_run(path: str) -> Run:
    """A run folder's metrics, its resolved config (flat keys) and its command line."""
    rows = read_metrics(os.path.join(path, "metrics.jsonl"))
    cfg_path = os.path.join(path, "config.yaml")
    config: dict[str, object] = {}
    if os.path.isfile(cfg_path):
        container = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=True)
        config = flat(dict(container) if isinstance(container, dict) else {})
    return Run(path, config, rows, _overrides(path))


def _overrides(path: str) -> dict[str, str] | None:
    """key -> value of the command line that started the run (None: not started by hydra)."""
    file = os.path.join(path, ".hydra", "overrides.yaml")
    if not os.path.isfile(file):
        return None
    listed = OmegaConf.load(file)
    pairs = [str(o).lstrip("+~").split("=", 1) for o in listed]
    return {p[0]: p[1] if len(p) > 1 else "" for p in pairs}


def flat(node: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for k, v in node.items():
        if isinstance(v, dict) and v:  # (an empty mapping, `plugins`, is a value)
            out |= flat(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def group(runs: list[Run], by: list[str] | None = None) -> list[Setting]:
    """Settings keyed by what differs between the runs (seeds pooled), or by the given keys
    ``by`` only. What differs: the command-line keys whose values differ (``model=flow``),
    when hydra started every run; else the config keys, a group's keys in one (``model=``
    its name, when the model differs)."""
    varying = by or _varying(runs)
    settings: dict[str, Setting] = {}
    for run in runs:
        parts = [f"{k}={run.value(k)}" for k in varying]  # (joined as seeds.py's variants)
        label = " ".join(parts) or str(run.config.get("env.name", os.path.basename(run.path)))
        settings.setdefault(label, Setting(label)).runs.append(run)
    return list(settings.values())


def repeated_seeds(settings: list[Setting]) -> list[str]:
    """A warning per setting that holds a seed more than once (two campaigns of the same
    config, say one with batched seeds): each such run counts as one more seed."""
    out = []
    for s in settings:
        paths: dict[object, list[str]] = {}
        for run in s.runs:
            paths.setdefault(run.value("seed"), []).append(run.path)
        for seed, where in paths.items():
            if len(where) > 1:
                out.append(
                    f"warning: {s.label} holds seed {seed} {len(where)} times ({', '.join(where)})"
                    ": each counts as a seed; plot one of them, or tell them apart with --by"
                )
    return out


def _varying(runs: list[Run]) -> list[str]:
    def differs(key: str) -> bool:
        return not key.startswith(IGNORED) and len({json.dumps(r.value(key)) for r in runs}) > 1

    if all(r.overrides is not None for r in runs):
        keys = sorted({k for r in runs for k in r.overrides or {}})
        return [k for k in keys if differs(k)]
    keys = sorted({k for r in runs for k in r.config})
    chosen = [g for g in GROUPS if differs(f"{g}.name")]  # the group's name says it all
    rest = [k for k in keys if k.split(".")[0] not in chosen and differs(k)]
    return chosen + rest


def run_curve(run: Run, metric: str, smooth: bool) -> tuple[np.ndarray, np.ndarray]:
    """A run's curve; ``smooth``: its evaluations after the random steps, each the mean of it
    and the ones before it (SMOOTH_WINDOW in all), as the seeds reports' smoothed columns."""
    steps, values = run.curve(metric)
    if not smooth:
        return steps, values
    keep = steps > int(str(run.config.get("algorithm.init_steps", 0)))
    return steps[keep], np.array(trailing_mean(list(values[keep])))


def summary_table(settings: list[Setting], metric: str, smooth: bool = False) -> str:
    """A text table, per setting: seeds, each run's last value at or before the last step every
    run reached (mean and std across seeds) and the AUC up to that step (the curve's mean
    height over it: the random steps' evaluations included, or with ``smooth`` each curve
    smoothed as :func:`run_curve` does, from the first past the random steps), so that
    settings and seeds compare over the same steps; a run with no value that early (another
    logging schedule), or none past its random steps to smooth, is left out and named."""
    curves = [(s, [(r, run_curve(r, metric, smooth)) for r in s.runs]) for s in settings]
    ends = [c[0][-1] for _, rc in curves for _, c in rc if len(c[0])]
    if not ends:
        return f"no run has logged {metric}{' past its random steps' * smooth} yet"
    upto, rows, left_out, earlier, random = min(ends), [], [], [], []
    for s, rc in curves:
        finals, aucs = [], []
        for run, (steps, values) in rc:
            if not len(steps) and len(run.curve(metric)[0]):  # (smoothed: none past them yet)
                random.append(run.path)
                continue
            keep = steps <= upto
            if not keep.any():
                left_out += [run.path] if len(steps) else []
                continue
            steps, values = steps[keep], values[keep]
            finals.append(values[-1])
            if steps[-1] < upto:  # (another logging schedule: its value there is older)
                earlier.append(f"{run.path} at {steps[-1]:,.0f}")
            span = steps[-1] - steps[0]
            aucs.append(float(np.trapezoid(values, steps) / span) if span > 0 else float(values[0]))
        if finals:
            rows.append((s.label, summarize(finals), float(np.mean(aucs))))
    width = max([len("setting"), *(len(label) for label, _, _ in rows)])
    at = f"at step {upto:,.0f} (the last every run reached; AUC: the curve's mean height up to it"
    at += (
        f"; each seed smoothed first, the mean of its last {SMOOTH_WINDOW} evaluations past its "
        "random steps)"
        if smooth
        else ", from its first evaluation, the random steps' included)"
    )
    what = "return" if metric == "eval/return_mean" else metric
    lines = [at, f"{'setting':<{width}}  seeds  {what} there (mean ± std)     AUC"]
    for label, final, auc in rows:  # (one seed has no spread to state: no "± 0.0")
        spread = f"± {final.std:<10.1f}" if final.n > 1 else f"{'':<12}"
        lines.append(f"{label:<{width}}  {final.n:>5}  {final.mean:>12.1f} {spread}  {auc:>9.1f}")
    if earlier:
        lines.append(f"(their last {metric} before step {upto:,.0f}: {', '.join(earlier)})")
    if left_out:
        lines.append(f"(left out, no {metric} by step {upto:,.0f}: {', '.join(left_out)})")
    if random:
        lines.append(f"(left out, no {metric} past its random steps yet: {', '.join(random)})")
    return "\n".join(lines)


@dataclass
class Reference:
    """A published curve to draw beside the runs: mean and std of the return per env step."""

    label: str
    steps: np.ndarray
    mean: np.ndarray
    std: np.ndarray


def load_reference(path: str) -> Reference:
    """A CSV with columns ``step,mean,std`` (``#`` lines are comments); the label is the file
    name (``docs/reference/mbpo_hopper.csv`` -> ``mbpo_hopper``)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    table = [line.split(",") for line in lines]
    header, values = table[0], np.array(table[1:], dtype=float).reshape(-1, len(table[0]))
    if header != ["step", "mean", "std"]:
        raise ValueError(f"{path}: expected the columns step,mean,std, got {','.join(header)}")
    label = os.path.splitext(os.path.basename(path))[0]
    return Reference(label, values[:, 0], values[:, 1], values[:, 2])
