"""Learning curves and time-per-phase bars from run folders (``scripts/plot.py``).

Runs are grouped into *settings* by the config values that differ between them (the seed
aside), so a hydra multirun over ``rollout.max_length=1,5 seed=0,1,2`` gives two settings of
three seeds each.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import OmegaConf

# Keys that say how a run ran, not what it is: never a setting's label.
IGNORED: tuple[str, ...] = ("seed", "resume", "total_steps", "logger.", "checkpoint.", "eval.")
IGNORED += ("threads", "device", "hydra")
# Config groups: a run picks one file of each (model=flow); its keys follow from the choice.
GROUPS = ("env", "model", "algorithm", "agent")


@dataclass
class Run:
    path: str
    config: dict[str, object]
    rows: list[dict[str, float]]
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
                if k.startswith("time/") and k != "time/wall" and v is not None:
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
        for root, _, files in os.walk(path):
            if "metrics.jsonl" in files:
                found.append(root)
    if not found:
        raise FileNotFoundError(f"no run folder (with metrics.jsonl) under {', '.join(paths)}")
    return [load_run(p) for p in sorted(found)]


def load_run(path: str) -> Run:
    """A run folder's metrics, its resolved config (flat keys) and its command line."""
    with open(os.path.join(path, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    cfg_path = os.path.join(path, "config.yaml")
    config: dict[str, object] = {}
    if os.path.isfile(cfg_path):
        container = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=True)
        config = _flatten(dict(container) if isinstance(container, dict) else {})
    return Run(path, config, rows, _overrides(path))


def _overrides(path: str) -> dict[str, str] | None:
    """key -> value of the command line that started the run (None: not started by hydra)."""
    file = os.path.join(path, ".hydra", "overrides.yaml")
    if not os.path.isfile(file):
        return None
    listed = OmegaConf.load(file)
    pairs = [str(o).lstrip("+~").split("=", 1) for o in listed]
    return {p[0]: p[1] if len(p) > 1 else "" for p in pairs}


def _flatten(d: dict[Any, Any], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def group(runs: list[Run], by: list[str] | None = None) -> list[Setting]:
    """Settings keyed by what differs between the runs (seeds pooled), or by the given keys
    ``by`` only. What differs: the command-line keys whose values differ (``model=flow``),
    when hydra started every run; else the config keys, a group's keys in one (``model=``
    its name, when the model differs)."""
    varying = by or _varying(runs)
    settings: dict[str, Setting] = {}
    for run in runs:
        parts = [f"{k}={run.value(k)}" for k in varying]
        label = ",".join(parts) or str(run.config.get("env.name", os.path.basename(run.path)))
        settings.setdefault(label, Setting(label)).runs.append(run)
    return list(settings.values())


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


def summary(
    settings: list[Setting], metric: str = "eval/return_mean"
) -> list[dict[str, float | str]]:
    """Per setting: seeds, final value mean and std across seeds, normalised AUC."""
    rows: list[dict[str, float | str]] = []
    for s in settings:
        finals, aucs = [], []
        for run in s.runs:
            steps, values = run.curve(metric)
            if len(values) == 0:
                continue
            finals.append(values[-1])
            span = steps[-1] - steps[0]
            aucs.append(float(np.trapezoid(values, steps) / span) if span > 0 else float(values[0]))
        if finals:
            rows.append(
                {
                    "setting": s.label,
                    "seeds": len(finals),
                    "final_mean": float(np.mean(finals)),
                    "final_std": sample_std(finals),
                    "auc": float(np.mean(aucs)),
                }
            )
    return rows


def sample_std(values: list[float]) -> float:
    """The standard deviation over seeds with Bessel's correction (ddof 1); 0 for one."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def format_table(rows: list[dict[str, float | str]]) -> str:
    width = max([len("setting"), *(len(str(r["setting"])) for r in rows)])
    lines = [f"{'setting':<{width}}  seeds  final return (mean ± std)      AUC"]
    for r in rows:
        lines.append(
            f"{r['setting']!s:<{width}}  {r['seeds']:>5}  {r['final_mean']:>12.1f} ± "
            f"{r['final_std']:<10.1f}  {r['auc']:>9.1f}"
        )
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


def band(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """Steps, mean and sample std (ddof 1; 0 where one seed) over the seeds that reached each
    step: a run that stopped earlier leaves the steps after its last point (not carried on)."""
    grid = np.unique(np.concatenate([c[0] for c in curves]))
    inside = np.stack([(grid >= st[0]) & (grid <= st[-1]) for st, _ in curves])
    ys = np.stack([np.interp(grid, st, v) for st, v in curves]) * inside
    n = inside.sum(0)
    mean = ys.sum(0) / n
    var = (((ys - mean) * inside) ** 2).sum(0) / np.maximum(n - 1, 1)
    return grid, mean, np.sqrt(var)


def plot_curves(
    settings: list[Setting],
    out: str,
    metric: str = "eval/return_mean",
    reference: Reference | None = None,
) -> list[str]:
    """Mean and a ±std band over seeds per setting (and a reference curve over the runs'
    range of steps); writes ``out`` as PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    if reference is not None:
        last = max(float(run.curve(metric)[0].max(initial=0)) for s in settings for run in s.runs)
        keep = reference.steps <= last + 1000
        x, m, sd = reference.steps[keep], reference.mean[keep], reference.std[keep]
        ax.plot(x, m, "k--", label=f"{reference.label} (published, mean ± std)")
        ax.fill_between(x, m - sd, m + sd, alpha=0.12, color="k")
    for s in settings:
        curves = [run.curve(metric) for run in s.runs]
        curves = [c for c in curves if len(c[0])]
        if not curves:
            continue
        grid, mean, std = band(curves)
        seeds = f"{len(curves)} seed{'' if len(curves) == 1 else 's'}"
        (line,) = ax.plot(grid, mean, label=f"{s.label} ({seeds})")
        ax.fill_between(grid, mean - std, mean + std, alpha=0.2, color=line.get_color())
    ax.set_xlabel("env steps")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, out)


def plot_phases(settings: list[Setting], out: str) -> list[str]:
    """Stacked bars: seconds per phase (``time/*``), mean over the runs of each setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per = [
        {
            k: float(np.mean([r.phase_seconds().get(k, 0.0) for r in s.runs]))
            for k in {k for r in s.runs for k in r.phase_seconds()}
        }
        for s in settings
    ]
    phases = sorted({k for p in per for k in p}, key=lambda k: -sum(p.get(k, 0.0) for p in per))
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(settings) + 2.6))
    left = np.zeros(len(settings))
    for phase in phases:
        widths = np.array([p.get(phase, 0.0) for p in per])
        ax.barh([s.label for s in settings], widths, left=left, label=phase)
        left += widths
    ax.set_xlabel("seconds (sum of time/* over the run)")
    ax.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    fig.tight_layout()
    return _save(fig, out)


def _save(fig: object, out: str) -> list[str]:
    base, _ = os.path.splitext(out)
    paths = [f"{base}.png", f"{base}.svg"]
    for p in paths:
        fig.savefig(p, dpi=120)  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    plt.close(fig)  # type: ignore[arg-type]
    return paths
