"""A 2 x 2 hydra multirun (rollout length x seed) -> four runs -> plot.py figure and table."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_cli import TINY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_multirun_sweep_then_plot(train_cmd: list[str], tmp_path: str) -> None:
    sweep = os.path.join(tmp_path, "sweep")
    args = [a for a in TINY if not a.startswith("total_steps")] + [
        "total_steps=200",
        "rollout.min_length=1",
        "rollout.max_length=1,3",
        "seed=0,1",
        "rollout.min_epoch=0",
        "rollout.max_epoch=0",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = subprocess.run([*train_cmd, "-m", *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted(glob.glob(os.path.join(sweep, "*", "metrics.jsonl")))
    assert len(runs) == 4
    out = os.path.join(tmp_path, "fig.png")
    plot = [sys.executable, os.path.join(ROOT, "scripts", "plot.py"), sweep, "--out", out]
    proc = subprocess.run(plot, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 runs, 2 settings" in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("rollout.max_length=")]
    assert [line.split()[0] for line in lines] == ["rollout.max_length=1", "rollout.max_length=3"]
    assert all(line.split()[1] == "2" for line in lines)  # two seeds each
    for path in (out, out.replace(".png", ".svg"), out.replace(".png", "_phases.png")):
        assert os.path.getsize(path) > 1000, path
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # The same runs beside a published curve (one named for no env: these runs are
    # Pendulum's, and mbpo_hopper.csv would be refused as another env's).
    ref = os.path.join(tmp_path, "published.csv")
    with open(os.path.join(ROOT, "docs", "reference", "mbpo_hopper.csv"), encoding="utf-8") as f:
        text = f.read()
    with open(ref, "w", encoding="utf-8") as f:
        f.write(text)
    proc = subprocess.run(
        [*plot, "--reference", ref, "--per-step"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| env steps | rollout.max_length=1 | rollout.max_length=3 |" in proc.stdout
    smoothed = "rollout.max_length=1, smoothed | rollout.max_length=3, smoothed | published"
    assert smoothed in proc.stdout and "rollout.max_length=3 − rollout.max_length=1" in proc.stdout
    assert "| 200 | " in proc.stdout and "(n=2)" in proc.stdout


def test_reference_curve_reads_mean_and_std(tmp_path: str) -> None:
    from mbrl.tools.plotting import load_reference

    ref = load_reference(os.path.join(ROOT, "docs", "reference", "mbpo_hopper.csv"))
    # erl_lib's curves at step 10019: 92.6, 210.8, 329.0, 447.2, 565.3 (mean -2..+2 std).
    i = list(ref.steps).index(10019)
    assert (ref.label, ref.mean[i], ref.std[i]) == ("mbpo_hopper", 329.0, 118.2)
    assert ref.mean[i] - 2 * ref.std[i] == pytest.approx(92.6, abs=0.2)
    bad = os.path.join(tmp_path, "bad.csv")
    with open(bad, "w", encoding="utf-8") as f:
        f.write("step,return\n1,2\n")
    with pytest.raises(ValueError, match="expected the columns step,mean,std"):
        load_reference(bad)


def test_plot_reports_missing_runs(tmp_path: str) -> None:
    plot = [sys.executable, os.path.join(ROOT, "scripts", "plot.py"), str(tmp_path)]
    proc = subprocess.run(plot, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no run folder" in proc.stderr


def _run_folder(root: str, name: str, overrides: list[str], hydra: bool) -> str:
    """A run folder as train.py leaves it: the whole resolved config, the command line."""
    from test_fidelity import composed

    from mbrl.runtime.validate import to_yaml

    path = os.path.join(root, name)
    os.makedirs(os.path.join(path, ".hydra"))
    with open(os.path.join(path, "config.yaml"), "w", encoding="utf-8") as f:
        f.write(to_yaml(composed(*overrides)))
    if hydra:
        with open(os.path.join(path, ".hydra", "overrides.yaml"), "w", encoding="utf-8") as f:
            f.write("".join(f"- {o}\n" for o in overrides))
    with open(os.path.join(path, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.write('{"step": 1000, "eval/return_mean": 1.0}\n')
    return path


@pytest.mark.parametrize("hydra", [True, False])
def test_labels_name_only_what_differs(tmp_path: str, hydra: bool) -> None:
    """A model=flow,gaussian x seed=0,1 sweep: two settings labelled model=flow and
    model=gaussian, not every model key (with or without hydra's record of the command), nor
    how long each run was let run (seeds.py's max_minutes, which differs by invocation)."""
    from mbrl.tools.plotting import find_runs, group

    for model in ("flow", "gaussian"):
        for seed in (0, 1):
            over = ["env=hopper", f"model={model}", f"seed={seed}", "total_steps=8000"]
            over.append(f"max_minutes={6.33 if seed else 6.5}")
            _run_folder(str(tmp_path), f"{model}_{seed}", over, hydra)
    settings = group(find_runs([str(tmp_path)]))
    assert sorted((s.label, len(s.runs)) for s in settings) == [
        ("model=flow", 2),
        ("model=gaussian", 2),
    ]
    by = group(find_runs([str(tmp_path)]), by=["model", "total_steps"])  # (as seeds.py's labels)
    assert sorted(s.label for s in by) == [
        "model=flow total_steps=8000",
        "model=gaussian total_steps=8000",
    ]


def test_the_band_averages_the_seeds_that_reached_each_step() -> None:
    """A seed stopped at step 2 does not carry its last value on: at steps 3 and 4 the mean is
    the other seeds' alone, and the std is theirs (one seed: 0)."""
    from mbrl.tools.figures import band

    a = (np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 20.0, 30.0, 40.0]))
    b = (np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 50.0]))
    c = (np.array([1.0, 2.0]), np.array([5.0, 5.0]))
    grid, mean, std, n = band([a, b, c])
    assert grid.tolist() == [1.0, 2.0, 3.0, 4.0] and n.tolist() == [3, 3, 2, 1]
    reached = [[10, 0, 5], [20, 0, 5], [30, 50], [40]]  # the values at steps 1, 2, 3, 4
    expected_std = [np.std(r, ddof=1) if len(r) > 1 else 0.0 for r in reached]
    assert mean.tolist() == pytest.approx([5.0, 25 / 3, 40.0, 40.0])
    assert std.tolist() == pytest.approx(expected_std)


def test_a_line_cut_by_a_kill_is_left_out(tmp_path: Path) -> None:
    """A run killed while writing its metrics: load_run (every report reads runs through it)
    keeps the whole lines and leaves the cut one out, as the seeds runner's readers do."""
    from mbrl.tools.plotting import load_run

    path = str(tmp_path / "run")
    os.makedirs(path)
    with open(os.path.join(path, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.write(
            '{"step": 1000, "eval/return_mean": 1.0}\n{"step": 2000, "eval/return_mean": 2.0}\n'
        )
        f.write('{"step": 3000, "eval/ret')
    assert [r["step"] for r in load_run(path).rows] == [1000, 2000]


def test_a_campaign_folder_keeps_its_reports_order_and_figure(tmp_path: Path) -> None:
    """plot.py on a seeds.py campaign (variants given gaussian first): the settings in the
    campaign's order, so the paired difference is flow − gaussian as in its report, and the
    figure written beside the report's curves.png, not over it."""
    import json

    camp = str(tmp_path / "camp")
    os.makedirs(camp)
    with open(os.path.join(camp, "seeds.json"), "w", encoding="utf-8") as f:
        json.dump({"base": ["env=pendulum"], "variants": [["model=gaussian"], ["model=flow"]],
                   "seeds": [0, 1]}, f)  # fmt: skip
    for model, gain in (("gaussian", 0.0), ("flow", 100.0)):
        for seed in (0, 1):
            over = ["env=pendulum", f"model={model}", f"seed={seed}", "total_steps=3000"]
            path = _run_folder(os.path.join(camp, "runs", f"model-{model}"), f"seed_{seed}", over,
                               hydra=True)  # fmt: skip
            with open(os.path.join(path, "metrics.jsonl"), "w", encoding="utf-8") as f:
                for step in (1000, 2000, 3000):
                    value = -1000.0 + gain + 10 * seed + step / 100
                    f.write(json.dumps({"step": step, "eval/return_mean": value}) + "\n")
    plot = [sys.executable, os.path.join(ROOT, "scripts", "plot.py"), camp, "--per-step"]
    proc = subprocess.run(plot, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "model=flow − model=gaussian" in proc.stdout, proc.stdout
    assert "model=gaussian − model=flow" not in proc.stdout
    assert "+100" in proc.stdout  # (flow is 100 above gaussian in every pair)
    assert os.path.isfile(os.path.join(camp, "plot_curves.png"))
    assert not os.path.exists(os.path.join(camp, "curves.png"))
    # --baseline names the setting the others are paired against
    proc = subprocess.run([*plot, "--baseline", "model=flow"], capture_output=True, text=True)
    assert proc.returncode == 0 and "model=gaussian − model=flow" in proc.stdout, proc.stderr
    assert "−100" in proc.stdout or "-100" in proc.stdout
    proc = subprocess.run([*plot, "--baseline", "model=flo"], capture_output=True, text=True)
    assert (
        proc.returncode == 2 and "none of the settings: model=gaussian, model=flow" in proc.stderr
    )
    assert proc.stderr.startswith("error: --baseline 'model=flo'") and proc.stderr.count("\n") == 1


def _fake_run(path: str, seed: int, values: dict[int, float]) -> Any:
    """A run of ``values`` (step -> return) past 2000 random steps, as load_run gives it."""
    from mbrl.tools.plotting import Run

    rows = [{"step": step, "eval/return_mean": v} for step, v in values.items()]
    return Run(path, {"seed": seed, "algorithm.init_steps": 2000}, rows)


def test_the_summary_compares_every_run_at_the_step_all_reached() -> None:
    """Runs cut by a budget at different steps: the return and the AUC are read at and up to
    the last step every run reached, for every setting alike."""
    from mbrl.tools.plotting import Setting, summary_table

    long = _fake_run("a", 0, {1000: 0.0, 2000: 10.0, 3000: 20.0, 4000: 900.0})
    short = _fake_run("b", 0, {1000: 0.0, 2000: 30.0, 3000: 50.0})
    text = summary_table([Setting("long", [long]), Setting("short", [short])], "eval/return_mean")
    assert text.splitlines()[0].startswith("at step 3,000 (the last every run reached")
    auc_long = np.trapezoid([0.0, 10.0, 20.0], [1000, 2000, 3000]) / 2000  # (4000 left out)
    line = text.splitlines()[2]  # (one seed: its value, no "± 0.0")
    assert f" {20.0:.1f} " in line and "±" not in line and f"{auc_long:.1f}" in line
    assert "900" not in text
    # a run on another logging schedule, with nothing that early: left out, and named
    late = _fake_run("c", 1, {2000: 5.0, 4000: 7.0})
    text = summary_table(
        [Setting("long", [long, late]), Setting("short", [short])], "eval/return_mean"
    )
    assert "left out, no eval/return_mean by step 3,000: c" not in text  # (2000 is early enough)
    assert "(their last eval/return_mean before step 3,000: c at 2,000)" in text  # (and named)
    odd = _fake_run("d", 1, {3500: 5.0})
    text = summary_table(
        [Setting("long", [long]), Setting("odd", [odd, short])], "eval/return_mean"
    )
    assert text.splitlines()[0].startswith("at step 3,000") and text.endswith("by step 3,000: d)")


def test_smoothed_curves_and_interval_bands_are_the_reports() -> None:
    """--smooth draws each seed's trailing mean of its evaluations past its random steps (the
    reports' smoothed column, computed here by hand); --interval the bootstrap interval of the
    mean where 4 seeds or more reached a step, no band where fewer did."""
    from mbrl.tools.figures import _figure, draw_curves
    from mbrl.tools.plotting import Setting
    from mbrl.tools.stats import bootstrap_interval

    steps = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
    rng = np.random.default_rng(0)
    draws = {s: rng.normal(100 * s, 50, len(steps)).tolist() for s in range(4)}
    values = {s: dict(zip(steps, draws[s], strict=True)) for s in range(4)}
    for seed in (2, 3):  # (two seeds stop at 5000: from 6000 on, two seeds, no band)
        values[seed] = {k: v for k, v in values[seed].items() if k <= 5000}
    runs = [_fake_run(f"r{s}", s, values[s]) for s in range(4)]

    def smoothed(seed: int, step: int) -> float:
        after = [k for k in sorted(values[seed]) if 2000 < k <= step][-5:]
        return float(np.mean([values[seed][k] for k in after]))

    _, ax = _figure((5, 3))
    draw_curves(ax, [Setting("s", runs)], "eval/return_mean", None, smooth=True, interval=True)
    faded, line = ax.get_lines()  # (the mean at every step; drawn full where 4 seeds are)
    assert line.get_xdata().tolist() == [3000, 4000, 5000, 6000, 7000, 8000]
    expected = [
        np.mean([smoothed(s, k) for s in range(4) if k in values[s]]) for k in line.get_xdata()
    ]
    assert faded.get_ydata().tolist() == pytest.approx(expected) and faded.get_alpha() < 1
    full = np.where(line.get_xdata() <= 5000, expected, np.nan)  # (from 6000: two seeds)
    assert np.array_equal(line.get_ydata(), full, equal_nan=True)
    assert "faded where under 4" in line.get_label()
    (poly,) = ax.collections
    xs, ys = poly.get_paths()[0].vertices.T
    assert xs.min() == 3000 and xs.max() == 5000  # (the band ends where two seeds stop)
    lo, hi = bootstrap_interval([smoothed(s, 5000) for s in range(4)])
    assert any(abs(y - lo) < 1e-9 for y in ys) and any(abs(y - hi) < 1e-9 for y in ys)
    assert "95 % bootstrap interval" in line.get_label() and "smoothed" in ax.get_title()


def test_a_seed_given_twice_is_named(tmp_path: str) -> None:
    """Two campaigns of one config (one with batched seeds, which never splits a setting):
    plot.py says which seeds it would count twice, and where."""
    for camp in ("solo", "batched"):
        for seed in (0, 1):
            over = ["env=pendulum", f"seed={seed}"] + (["batch_seeds=2"] * (camp == "batched"))
            _run_folder(str(tmp_path), f"{camp}_{seed}", over, hydra=True)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "plot.py"), str(tmp_path),
         "--out", os.path.join(str(tmp_path), "fig.png")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "4 runs, 1 settings" in proc.stdout
    for seed in (0, 1):
        paths = ", ".join(os.path.join(str(tmp_path), f"{c}_{seed}") for c in ("batched", "solo"))
        assert f"holds seed {seed} 2 times ({paths})" in proc.stderr, proc.stderr


def test_plots_that_would_mislead_or_be_empty_are_refused_in_one_line(tmp_path: str) -> None:
    """Runs of two envs (not on one scale, their seeds no pairs), a --by key no run has, a
    --metric no run logged, another env's --reference: exit code 2, the line naming what
    was meant; one env's runs with another logged metric plot, the table naming it."""
    for env, seed in (("hopper", 0), ("walker2d", 0), ("hopper", 1)):
        _run_folder(str(tmp_path), f"{env}_{seed}", [f"env={env}", f"seed={seed}"], hydra=True)
    plot = [sys.executable, os.path.join(ROOT, "scripts", "plot.py")]

    def refused(*args: str) -> str:
        proc = subprocess.run([*plot, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
        assert not glob.glob(os.path.join(tmp_path, "**", "*.png"), recursive=True)  # (none)
        return proc.stderr

    said = refused(str(tmp_path))
    assert said.startswith("error: the runs are of 2 envs (env=hopper: 2 runs, e.g. ")
    assert "env=walker2d: 1 runs" in said and said.endswith("plot one env at a time\n")
    hopper = [os.path.join(tmp_path, f"hopper_{s}") for s in (0, 1)]
    said = refused(*hopper, "--by", "modle")
    assert "--by modle: no run has this key; did you mean model" in said
    said = refused(*hopper, "--metric", "return_mean")
    assert "--metric return_mean: no run has logged it; did you mean eval/return_mean?" in said
    said = refused(*hopper, "--reference", os.path.join(ROOT, "docs/reference/mbpo_walker2d.csv"))
    assert "is walker2d's curve (its file name); the runs are env=hopper" in said
    said = refused(*hopper, "--out", os.path.join(tmp_path, "fig.abc"))
    assert "--out " in said and "matplotlib writes no .abc figure; give one of " in said
    for path in hopper:
        with open(os.path.join(path, "metrics.jsonl"), "a", encoding="utf-8") as f:
            f.write('{"step": 1000, "model/holdout_nll": -3.0}\n')
    out = os.path.join(tmp_path, "nll.png")
    args = [*hopper, "--metric", "model/holdout_nll", "--out", out]
    proc = subprocess.run([*plot, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "model/holdout_nll there (mean ± std)" in proc.stdout
    assert os.path.isfile(out)
    pdf = os.path.join(tmp_path, "nll.pdf")  # (a format asked for: written beside png and svg)
    proc = subprocess.run([*plot, *hopper, "--out", pdf], capture_output=True, text=True)
    assert proc.returncode == 0 and os.path.getsize(pdf) > 0, proc.stderr[-2000:]


def test_runs_a_live_process_is_writing_are_named(tmp_path: str) -> None:
    """A run folder whose .lock a live process holds (flock, as a run does) is still being
    written: plot.py says so. A lock file whose pid holds no lock on it (a killed run's,
    its pid reused by another process, or gone) is no live run."""
    from mbrl.runtime.runlock import held_by_another

    path = _run_folder(str(tmp_path), "hopper_0", ["env=hopper", "seed=0"], hydra=True)
    lock = os.path.join(path, ".lock")
    hold = (
        "import fcntl, os, sys, time\n"
        f"f = open({lock!r}, 'a+')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"
        "f.truncate(0); f.write(f'pid {os.getpid()}\\n'); f.flush()\n"
        "print('held', flush=True); time.sleep(60)\n"
    )
    live = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None and live.stdout.readline() == "held\n"
        assert held_by_another(path)
        plot = [sys.executable, os.path.join(ROOT, "scripts", "plot.py"), path]
        proc = subprocess.run(plot, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        said = f"note: still being written by a live process, shown as far as now: {path}"
        assert said in proc.stderr
    finally:
        live.kill()
        live.wait()
    assert not held_by_another(path)  # (the pid is gone: a lock file left behind)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a live process that holds no lock on the file (a pid reused)
        with open(lock, "w", encoding="ascii") as f:
            f.write(f"pid {other.pid}\n")
        assert not held_by_another(path)
    finally:
        other.kill()
        other.wait()


def test_a_key_every_run_has_as_null_is_no_typo() -> None:
    """--by a key all runs hold as null groups them all (allowed); a metric logged only as
    null (non-finite) is said to be so, not "did you mean" itself."""
    from mbrl.tools.plotting import Run, check_runs

    runs = [
        Run(f"r{s}", {"env.name": "hopper", "seed": s, "model.max_epochs": None},
            [{"step": 1000, "eval/return_mean": 1.0, "model/holdout_nll": None}])
        for s in (0, 1)
    ]  # fmt: skip
    assert check_runs(runs, ["model.max_epochs"], "eval/return_mean") == {"hopper"}
    with pytest.raises(ValueError, match=r"^--metric model/holdout_nll: every value logged is"):
        check_runs(runs, None, "model/holdout_nll")


def test_the_published_curve_is_drawn_for_runs_short_of_its_second_point() -> None:
    """Runs that end at 6000, before the published curve's second point (its first is 6019):
    the curve is still a line (two points), not a lone point that draws nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mbrl.tools.figures import draw_curves
    from mbrl.tools.plotting import Setting, load_reference

    ref = load_reference(os.path.join(ROOT, "docs", "reference", "mbpo_hopper.csv"))
    runs = [_fake_run(f"/runs/{s}", s, {5000: 100.0 + s, 6000: 200.0 + s}) for s in (0, 1)]
    fig, ax = plt.subplots()
    draw_curves(ax, [Setting("model=flow", runs)], "eval/return_mean", ref)
    (published,) = [line for line in ax.get_lines() if "published" in str(line.get_label())]
    assert np.asarray(published.get_xdata()).tolist() == ref.steps[:2].tolist()
    plt.close(fig)


def test_a_settings_colour_and_style_do_not_depend_on_the_order() -> None:
    """--baseline puts its setting first: each setting keeps its colour and line style."""
    from mbrl.tools.figures import _figure, draw_curves
    from mbrl.tools.plotting import Setting

    a = Setting("model=flow", [_fake_run("a", 0, {1000: 0.0, 3000: 5.0})])
    b = Setting("model=gaussian", [_fake_run("b", 0, {1000: 0.0, 3000: 7.0})])
    looks = []
    for order in ([a, b], [b, a]):
        _, ax = _figure((5, 3))
        draw_curves(ax, order, "eval/return_mean", None)
        named = [ln for ln in ax.get_lines() if not str(ln.get_label()).startswith("_")]
        looks.append({ln.get_label(): (ln.get_color(), ln.get_linestyle()) for ln in named})
    assert looks[0] == looks[1] and len(set(looks[0].values())) == 2


def test_the_summary_of_smoothed_curves_is_the_smoothed_values() -> None:
    """With --smooth the printed return and AUC are the smoothed curve's (the figure's), each
    seed's trailing mean past its random steps, computed here by hand."""
    from mbrl.tools.plotting import Setting, summary_table

    values = {1000: 0.0, 2000: 0.0, 3000: 10.0, 4000: 30.0, 5000: 80.0}
    text = summary_table([Setting("s", [_fake_run("a", 0, values)])], "eval/return_mean", True)
    smoothed = [10.0, 20.0, 40.0]  # (3000, 4000, 5000: the mean of the evaluations past 2000)
    auc = np.trapezoid(smoothed, [3000, 4000, 5000]) / 2000
    line = text.splitlines()[2]
    assert f" {40.0:.1f} " in line and f"{auc:.1f}" in line, text
    assert "each seed smoothed first" in text.splitlines()[0]
    raw = summary_table([Setting("s", [_fake_run("a", 0, values)])], "eval/return_mean")
    assert f" {80.0:.1f} " in raw.splitlines()[2] and "random steps' included" in raw
    # a run with no evaluation past its random steps has nothing to smooth: named, not counted
    young = _fake_run("y", 1, {1000: 0.0, 2000: 0.0})
    text = summary_table(
        [Setting("s", [_fake_run("a", 0, values), young])], "eval/return_mean", True
    )
    assert text.splitlines()[2].split()[1] == "1", text  # (one seed)
    assert text.endswith("(left out, no eval/return_mean past its random steps yet: y)")
    alone = summary_table([Setting("s", [young])], "eval/return_mean", True)
    assert alone == "no run has logged eval/return_mean past its random steps yet"
