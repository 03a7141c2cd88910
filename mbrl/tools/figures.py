"""The figures of ``scripts/plot.py`` and ``scripts/seeds.py``: learning curves (a mean over
seeds per setting with a ±std band or a bootstrap interval, raw or each seed smoothed as a
published curve is, beside that curve) and time-per-phase bars."""

from __future__ import annotations

import os
import textwrap
from typing import Any

import numpy as np

from mbrl.envs import env_spec
from mbrl.tools.plotting import Reference, Run, Setting, run_curve
from mbrl.tools.stats import INTERVAL_SEEDS, SMOOTH_WINDOW, bootstrap_interval

# What a reader calls a metric on an axis (others keep their key).
AXIS_LABELS = {"eval/return_mean": "evaluation return (mean of its episodes)"}
# One line style and marker per setting, so that settings whose curves coincide (paired seeds
# share their first steps) stay visible: a dashed line over a solid one, hollow markers.
STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 1, 1, 1)), "v"))


def band(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """Steps, mean, sample std (ddof 1; 0 where one seed) and n over the seeds that reached each
    step: a run that stopped earlier leaves the steps after its last point (not carried on)."""
    grid, ys, inside = _reached(curves)
    ys = ys * inside
    n = inside.sum(0)
    mean = ys.sum(0) / n
    var = (((ys - mean) * inside) ** 2).sum(0) / np.maximum(n - 1, 1)
    return grid, mean, np.sqrt(var), n


def env_name(runs: list[Run]) -> str:
    """The gymnasium ids of the runs' envs (``Hopper-v4``), from their configs."""
    names = []
    for run in runs:
        name, version = run.config.get("env.name"), run.config.get("env.version")
        if name is None:  # (a run folder without its config.yaml)
            continue
        try:
            ver = None if version is None else str(version)
            names.append(env_spec(str(name)).version(ver).gym_id)
        except KeyError:  # (an env of a plug-in not loaded here, or no config)
            names.append(str(name))
    return ", ".join(dict.fromkeys(names)) or "env not recorded"


def machines(runs: list[Run]) -> str:
    """`` on <machine>`` as the runs' ``speed/device`` rows name it (several: each once);
    empty for runs that did not record it (older runs)."""
    names = [str(r["speed/device"]) for run in runs for r in run.rows if r.get("speed/device")]
    return f" on {', '.join(dict.fromkeys(names))}" if names else ""


def plot_curves(
    settings: list[Setting],
    out: str,
    metric: str,
    reference: Reference | None,
    smooth: bool = False,
    interval: bool = False,
) -> list[str]:
    """``draw_curves`` on a figure of its own, written to ``out`` as PNG and SVG."""
    fig, ax = _figure((7.5, 4.8))
    draw_curves(ax, settings, metric, reference, smooth, interval)
    return _save(fig, out)


def interval_band(
    curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 95 % bootstrap interval of the mean over the seeds that reached each step of
    ``grid``, where :data:`INTERVAL_SEEDS` or more did (``keep``: those steps)."""
    _, ys, inside = _reached(curves, grid)
    keep = inside.sum(0) >= INTERVAL_SEEDS
    low, high = np.full(grid.shape, np.nan), np.full(grid.shape, np.nan)
    for i in np.flatnonzero(keep):  # (one bootstrap per step drawn: a figure, no hot path)
        low[i], high[i] = bootstrap_interval(ys[inside[:, i], i])
    return low, high, keep


def _reached(
    curves: list[tuple[np.ndarray, np.ndarray]], grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps of every curve (or ``grid``), each curve's value there (seeds x steps), and
    whether the curve reached each step (a run that stopped earlier is not carried on)."""
    if grid is None:
        grid = np.unique(np.concatenate([c[0] for c in curves]))
    inside = np.stack([(grid >= st[0]) & (grid <= st[-1]) for st, _ in curves])
    return grid, np.stack([np.interp(grid, st, v) for st, v in curves]), inside


def draw_curves(
    ax: Any,
    settings: list[Setting],
    metric: str,
    reference: Reference | None,
    smooth: bool = False,
    interval: bool = False,
) -> None:
    """Per setting its mean over seeds and a band, ±std or (``interval``) the 95 % bootstrap
    interval of the mean where 4 seeds or more reached the step (the legend says which, with
    n, each entry a line over its band), the line faded where too few of its seeds reached
    the step for an interval; ``smooth``: each seed's curve smoothed first
    (:func:`run_curve`); a reference curve over the runs' range of steps; where the random
    steps end; titled with the env, the machines and the steps the runs reached. Each setting
    has its own colour, line style and marker, the same whatever the settings' order
    (``--baseline`` reorders them), later ones drawn on top."""
    runs = [run for s in settings for run in s.runs]
    last = max((float(run.curve(metric)[0].max(initial=0)) for run in runs), default=0.0)
    handles: list[Any] = []
    if reference is not None:
        keep = reference.steps <= last + 1000
        keep[:2] = True  # (a line needs two points: runs short of its second still get one)
        x, m, sd = reference.steps[keep], reference.mean[keep], reference.std[keep]
        label = f"{reference.label}, published: mean ± std over its seeds"
        line = ax.plot(x, m, color="k", ls=(0, (1, 1)), lw=2, label=label, zorder=2)[0]
        handles.append((line, ax.fill_between(x, m - sd, m + sd, alpha=0.10, color="k", lw=0)))
    order = sorted(s.label for s in settings)
    for i, s in enumerate(settings):
        curves = [c for c in (run_curve(run, metric, smooth) for run in s.runs) if len(c[0])]
        if curves:
            handles.append(_setting(ax, s.label, curves, order.index(s.label), i, interval))
    _random_steps(ax, runs, smooth, last)
    title = f"{env_name(runs)}{machines(runs)}: {len(runs)} runs, up to {last:,.0f} env steps"
    if smooth:
        last_few = f"the mean of its last {SMOOTH_WINDOW} evaluations past its random steps"
        title += f"\neach seed smoothed: {last_few}"
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("env steps")
    ax.set_ylabel(AXIS_LABELS.get(metric, metric))
    ax.grid(alpha=0.3)
    if handles:  # (no run has evaluated yet: nothing to name)
        ax.legend(handles, [h[0].get_label() for h in handles], fontsize=8)


def _setting(
    ax: Any,
    label: str,
    curves: list[tuple[np.ndarray, np.ndarray]],
    style: int,
    depth: int,
    interval: bool,
) -> tuple[Any, Any]:
    """One setting's mean line (faded where fewer than :data:`INTERVAL_SEEDS` of its seeds, or
    fewer than all where it has fewer, reached the step) and band, in its colour and style
    number ``style``; (line, band) for the legend."""
    grid, mean, std, n = band(curves)
    ls, marker = STYLES[style % len(STYLES)]
    low, high = int(n.min()), int(n.max())  # (n: the seeds that reached each step)
    seeds = f"{high}" if low == high else f"{low}–{high}"
    what = "mean, 95 % bootstrap interval," if interval else "mean ± std"
    # (faded where too few seeds for an interval: a mean of two or three says little)
    enough = min(high, INTERVAL_SEEDS)
    fewer = f", faded where under {enough}" if low < enough else ""
    text = f"{label}: {what} over {seeds} seed{'' if high == 1 else 's'}{fewer}"
    color, zorder = f"C{style % 10}", 3 + depth
    kw = {"color": color, "ls": ls, "marker": marker, "ms": 4, "mfc": "none", "lw": 1.6}
    ax.plot(grid, mean, alpha=0.35, zorder=zorder, **kw)  # (every step, faded)
    (line,) = ax.plot(grid, np.where(n >= enough, mean, np.nan), label=text, zorder=zorder, **kw)
    lo, hi, where = interval_band(curves, grid) if interval else (mean - std, mean + std, None)
    return line, ax.fill_between(grid, lo, hi, where=where, alpha=0.15, color=color, lw=0)


def _random_steps(ax: Any, runs: list[Run], smooth: bool, last: float) -> None:
    """A dotted vertical line where the runs' random steps end, where they share that step
    and it falls inside the plot (smoothed curves start past it: no line)."""
    ends = {int(str(r.config.get("algorithm.init_steps", 0))) for r in runs}
    if smooth or len(ends) != 1 or not 0 < (end := ends.pop()) < last:
        return
    ax.axvline(end, color="0.5", lw=0.8, ls=":", zorder=1)
    ax.annotate(f" random steps end ({end:,})", (end, 0.01), xycoords=("data", "axes fraction"),
                va="bottom", fontsize=7, color="0.4")  # fmt: skip


def plot_phases(settings: list[Setting], out: str) -> list[str]:
    """Stacked bars: seconds per phase (``time/*``), mean over the runs of each setting."""
    per = [
        {
            k: float(np.mean([r.phase_seconds().get(k, 0.0) for r in s.runs]))
            for k in {k for r in s.runs for k in r.phase_seconds()}
        }
        for s in settings
    ]
    phases = sorted({k for p in per for k in p}, key=lambda k: -sum(p.get(k, 0.0) for p in per))
    fig, ax = _figure((7, 0.6 * len(settings) + 2.6))
    left = np.zeros(len(settings))
    for phase in phases:
        widths = np.array([p.get(phase, 0.0) for p in per])
        ax.barh([_wrapped(s.label) for s in settings], widths, left=left, label=phase)
        left += widths
    ax.set_xlabel(
        "seconds per run\n(time/* summed over each run, mean over the setting's runs; compile "
        "is each run's own,\nlonger for a run that met a cold cache)"
    )
    ax.legend(fontsize=8, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.38))
    return _save(fig, out)


def _wrapped(label: str, width: int = 28) -> str:
    """A long setting label on several lines, broken at its spaces or commas."""
    return "\n".join(textwrap.wrap(label.replace(",", ", "), width)).replace(", ", ",")


def _figure(size: tuple[float, float]) -> tuple[Any, Any]:
    """A figure and its axes, drawn off-screen (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size)


def check_figure_path(out: str) -> None:
    """A ValueError, before any work, for a figure path whose format matplotlib cannot write
    (each figure is written as .png and .svg, and in the format ``out`` names if another)."""
    from matplotlib.figure import Figure

    ext = os.path.splitext(out)[1].lower().lstrip(".")
    formats = Figure().canvas.get_supported_filetypes()
    if ext and ext not in formats:
        raise ValueError(
            f"--out {out}: matplotlib writes no .{ext} figure; give one of "
            f"{', '.join('.' + f for f in sorted(formats))} (or no extension: .png and .svg)"
        )


def _save(fig: Any, out: str) -> list[str]:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)  # (--out into a new folder)
    base, ext = os.path.splitext(out)
    paths = [f"{base}.png", f"{base}.svg"]
    if ext.lower() not in ("", ".png", ".svg"):  # (another format asked for: that one too)
        paths.append(out)
    for p in paths:
        fig.savefig(p, dpi=120, bbox_inches="tight")  # (a legend below the axes included)
    plt.close(fig)
    return paths
