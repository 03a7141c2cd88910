"""The seeds report on a committed metrics bundle (five GPU seeds per model on Hopper-v4),
checked against numbers computed here from the runs' metrics.jsonl; where stand-still counts
apply; the throughput lines; the curves figure."""

from __future__ import annotations

import json
import os
import tarfile

import numpy as np
import pytest
from scipy import stats

from mbrl.tools.figures import draw_curves
from mbrl.tools.plotting import Run, load_reference
from mbrl.tools.seed_report import load_settings, solo_rate, throughput, write_report
from mbrl.tools.seed_tables import _rule, cells

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = os.path.join(ROOT, "docs", "gpu", "2026-11-26-h200", "seeds", "metrics.tar.gz")
REFERENCE = os.path.join(ROOT, "docs", "reference", "mbpo_hopper.csv")
MODELS = ("gaussian", "flow")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("bundle"))
    with tarfile.open(BUNDLE) as tar:
        tar.extractall(out, filter="data")
    return out


def _evals(path: str) -> dict[int, tuple[float, float]]:
    """step -> (return, mean episode length), read here from the run's metrics.jsonl."""
    with open(os.path.join(path, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {
        r["step"]: (r["eval/return_mean"], r["eval/episode_length_mean"])
        for r in rows
        if r.get("eval/return_mean") is not None
    }


def test_the_report_matches_the_runs(campaign: str, tmp_path: str) -> None:
    paths = {m: [os.path.join(campaign, "runs", f"model-{m}", f"seed_{s}") for s in range(5)]
             for m in MODELS}  # fmt: skip
    settings = load_settings([(f"model={m}", paths[m]) for m in MODELS])
    write_report(str(tmp_path), settings, [], load_reference(REFERENCE), "# bundle")
    with open(os.path.join(tmp_path, "summary.json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(tmp_path, "summary.md"), encoding="utf-8") as f:
        assert "one process alone" not in f.read()  # no invocation ran these: no speed lines
    runs = {m: [_evals(p) for p in paths[m]] for m in MODELS}
    for m in MODELS:
        cells_ = report["variants"][f"model={m}"]
        for step in (6000, 7000, 8000):
            at = [r[step] for r in runs[m] if step in r]
            ret = [v for v, _ in at]
            cell = cells_[str(step)]
            assert (cell["n"], cell["mean"]) == (len(ret), pytest.approx(np.mean(ret)))
            assert cell["std"] == pytest.approx(np.std(ret, ddof=1))
            assert cell["low"] <= cell["mean"] <= cell["high"]
            # Hopper-v4: limit 1000, alive bonus 1
            assert cell["full"] == sum(length == 1000 for _, length in at)
            assert cell["still"] == sum(length == 1000 and abs(v - 1000) <= 50 for v, length in at)
            # smoothed: each seed's mean over its last five evaluations after step 5000
            smooth = [np.mean([r[k][0] for k in r if step - 5000 < k <= step and k > 5000])
                      for r in runs[m] if step in r]  # fmt: skip
            assert cell["smoothed"]["mean"] == pytest.approx(np.mean(smooth))
    pairs = report["paired"]["model=flow − model=gaussian"]
    gauss, flow = runs["gaussian"], runs["flow"]
    per_seed = []
    for s in range(5):
        common = sorted(k for k in set(gauss[s]) & set(flow[s]) if k > 5000)
        per_seed.append(np.mean([flow[s][k][0] - gauss[s][k][0] for k in common]))
    for step in (6000, 7000, 8000):
        d = [flow[s][step][0] - gauss[s][step][0] for s in range(5) if step in flow[s]]
        assert (pairs[str(step)]["n"], pairs[str(step)]["mean"]) == (
            len(d),
            pytest.approx(np.mean(d)),
        )
    assert pairs["overall"]["mean"] == pytest.approx(np.mean(per_seed))
    assert (pairs["overall"]["first"], pairs["overall"]["last"]) == (6000, 8000)
    assert "5000" not in pairs  # (the random steps: identical by pairing, not compared)
    with open(os.path.join(tmp_path, "summary.md"), encoding="utf-8") as f:
        md = f.read()
    assert (
        "| env steps | model=gaussian, smoothed | model=flow, smoothed | mbpo_hopper (published) |"
        in md
    )
    assert "full-length" in md and os.path.getsize(os.path.join(tmp_path, "curves.png")) > 1000
    # the stand-still counts by seed over the paired steps, and the paired sign-flip test
    for i, name in enumerate(("full-length", "still")):
        by = {m: [sum(_stands(flow[s][k] if m == "flow" else gauss[s][k])[i]
                      for k in set(gauss[s]) & set(flow[s]) if k > 5000) for s in range(5)]
              for m in MODELS}  # fmt: skip
        diff = np.subtract(by["flow"], by["gaussian"]).astype(float)
        p = 1.0 if not diff.any() else stats.permutation_test(
            (diff,), np.mean, permutation_type="samples", n_resamples=np.inf).pvalue  # fmt: skip
        for m in MODELS:  # summary.json: the same counts, seed -> [full-length, still]
            assert [pairs["counts"][f"model={m}"][str(k)][i] for k in range(5)] == by[m]
        row = {m: " | ".join(map(str, by[m])) for m in MODELS}
        anys = {m: sum(v > 0 for v in by[m]) for m in MODELS}
        assert f"| {name}, model=gaussian | {row['gaussian']} | {sum(by['gaussian'])} | " \
            f"{anys['gaussian']} |  |  |" in md  # fmt: skip
        assert f"| {name}, model=flow | {row['flow']} | {sum(by['flow'])} | {anys['flow']} | " \
            f"{diff.mean():+.2f} ± {diff.std(ddof=1):.2f} | {p:.2g} |" in md  # fmt: skip
    assert "stand-still counts by seed over the same steps (6,000–8,000):" in md
    high = pairs["overall"]["high"]  # (the verdict in words, from the interval)
    assert high < 0 and "(n=5): the interval excludes 0 (below it); sign-flip p " in md
    # and the paired sign-flip test of the seeds' mean differences, every assignment counted
    p = stats.permutation_test(
        (np.array(per_seed),), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    assert pairs["overall"]["sign_flip_p"] == pytest.approx(p)
    least = ", the least 5 seeds can give" if p == pytest.approx(2 / 2**5) else ""
    assert f"excludes 0 (below it); sign-flip p {p:.2g}{least}\n" in md


def _stands(evaluation: tuple[float, float]) -> tuple[bool, bool]:
    """(full-length, still) on Hopper-v4: 1000-step episodes; within 5 % of 1000 x 1."""
    ret, length = evaluation
    return length == 1000, length == 1000 and abs(ret - 1000) <= 50


def test_stand_still_counts_only_where_a_body_can_stand_still() -> None:
    """Hopper and Humanoid end an episode when the body falls and pay an alive bonus;
    Pendulum and HalfCheetah never end one (their spec's termination is ``never``);
    InvertedPendulum ends them but its full episodes are its success, not an alive bonus."""
    assert _rule("hopper", "v4", None) == (1000, 1.0)
    assert _rule("humanoid", None, 400) == (400, 5.0)
    for name in ("pendulum", "halfcheetah", "inverted_pendulum"):
        assert _rule(name, None, None) is None, name
    config = {"env.name": "hopper", "env.version": "v4", "seed": 0, "algorithm.init_steps": 5000}
    rows = [  # standing; creeping forward (1000 steps, 5.1 % above the alive bonus); falling
        {"step": 6000, "eval/return_mean": 1021.0, "eval/episode_length_mean": 1000.0},
        {"step": 7000, "eval/return_mean": 1051.0, "eval/episode_length_mean": 1000.0},
        {"step": 8000, "eval/return_mean": 300.0, "eval/episode_length_mean": 150.0},
    ]
    per = cells([Run("hopper_run", config, rows)])
    assert [per[k].counts() for k in (6000, 7000, 8000)] == [(1, 1), (1, 0), (0, 0)]
    smoothed = per[8000].smoothed()
    assert smoothed is not None
    assert smoothed.mean == pytest.approx((1021 + 1051 + 300) / 3)
    pendulum = {"env.name": "pendulum", "seed": 0, "algorithm.init_steps": 1000}
    assert cells([Run("p", pendulum, rows)])[6000].counts() is None
    unknown = {"env.name": "an_env_of_an_unloaded_plugin", "seed": 0}  # (and no config at all)
    for config in (unknown, {}):
        assert cells([Run("u", config, rows)])[6000].counts() is None


def test_throughput_lines_say_process_and_run_in_the_singular() -> None:
    one = {"start": 0.0, "end": 600.0, "procs": 1, "device": "cpu",
           "runs": {"a": {"before": 0, "after": 1000, "seconds": 500.0}}}  # fmt: skip
    two = {"start": 0.0, "end": 100.0, "procs": 2, "device": "cpu",
           "runs": {"a": {"before": 0, "after": 300, "seconds": 100.0},
                    "b": {"before": 0, "after": 500, "seconds": 100.0}}}  # fmt: skip
    batched = {**two, "procs": 1, "batch": 2}  # (both seeds in one process)
    lines = throughput([one, two, batched])
    assert lines == [
        "invocation 1: 1 process on cpu, 1 run, 1,000 env steps in 600 s: 1.7 env steps/s "
        "together, 2.0 per run (median)",
        "invocation 2: 2 processes on cpu, 2 runs, 800 env steps in 100 s: 8.0 env steps/s "
        "together, 4.0 per run (median)",
        "invocation 3: 1 process (2 seeds each, batched) on cpu, 2 runs, 800 env steps in "
        "100 s: 8.0 env steps/s together, 4.0 per run (median)",
    ]
    assert solo_rate([one, two]) == "one process alone: 2.0 env steps/s (invocation 1's median run)"
    assert "not measured" in solo_rate([two, batched])


def test_the_curves_figure_names_env_band_and_axis(campaign: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = [(f"model={m}", [os.path.join(campaign, "runs", f"model-{m}", f"seed_{s}")
                             for s in range(5)]) for m in MODELS]  # fmt: skip
    fig, ax = plt.subplots()
    draw_curves(ax, load_settings(paths), "eval/return_mean", load_reference(REFERENCE))
    last = max(max(_evals(p)) for _, ps in paths for p in ps)
    assert ax.get_title() == f"Hopper-v4: 10 runs, up to {last:,} env steps"
    assert ax.get_ylabel().startswith("evaluation return")
    box = ax.get_legend()
    assert box is not None
    legend = [t.get_text() for t in box.get_texts()]
    assert legend[1:] == [
        "model=gaussian: mean ± std over 5 seeds",
        "model=flow: mean ± std over 5 seeds",
    ]
    assert legend[0].startswith("mbpo_hopper, published: mean ± std")
    named = [ln for ln in ax.lines if not str(ln.get_label()).startswith("_")]  # (not faded)
    gauss, flow = named[1], named[2]  # their first 5000 steps coincide (paired seeds)
    assert np.allclose(np.asarray(gauss.get_ydata())[:5], np.asarray(flow.get_ydata())[:5])
    assert gauss.get_linestyle() != flow.get_linestyle() and gauss.get_marker() != flow.get_marker()
    assert flow.get_zorder() > gauss.get_zorder() and flow.get_markerfacecolor() == "none"
    plt.close(fig)


def test_a_paired_table_with_no_pair_yet_says_so() -> None:
    """Seeds whose second variant has not evaluated past its random steps: no empty table,
    one line saying there is no pair yet; once both have, a row."""
    from mbrl.tools.plotting import Setting
    from mbrl.tools.seed_tables import paired_text

    def run(label: str, seed: int, values: dict[int, float]) -> Run:
        rows = [{"step": k, "eval/return_mean": v} for k, v in values.items()]
        return Run(f"/{label}/{seed}", {"seed": seed, "algorithm.init_steps": 2000}, rows)

    first = Setting("a", [run("a", s, {1000: 1.0, 3000: 10.0 + s}) for s in (0, 1)])
    early = Setting("b", [run("b", s, {1000: 2.0}) for s in (0, 1)])
    assert paired_text([first, early]).startswith("none yet: no seed has both runs evaluated")
    later = Setting("b", [run("b", s, {1000: 2.0, 3000: 20.0 + 2 * s}) for s in (0, 1)])
    assert "| 3,000 | " in paired_text([first, later])
    assert "(n=2): too few seeds for an interval, so no difference can be established" in (
        paired_text([first, later])
    )


def test_a_span_of_one_step_is_that_step() -> None:
    """A campaign paired at one step past its random steps says "(1,500)", not
    "(1,500–1,500)"."""
    from mbrl.tools.seed_tables import _span

    assert (_span(1500, 1500), _span(6000, 8000)) == ("1,500", "6,000–8,000")


def test_the_curves_title_names_the_machines_the_runs_recorded() -> None:
    """Each machine a run's ``speed/device`` rows name, once, in the order met; none for
    runs that recorded none (runs from before the key)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mbrl.tools.plotting import Setting

    config: dict[str, object] = {"env.name": "hopper", "env.version": "v4"}

    def run(device: str | None, returns: list[float]) -> Run:
        rows: list[dict[str, object]] = [
            {"step": 1000 * (i + 1), "eval/return_mean": v} for i, v in enumerate(returns)
        ]
        if device:
            rows.append({"step": 1000 * len(returns), "speed/device": device})
        return Run(path="r", config=config, rows=rows)

    titles = []
    for devices in (["NVIDIA H200", "NVIDIA H200", "CPU (2 cores)"], [None, None]):
        fig, ax = plt.subplots()
        runs = [run(d, [10.0, 20.0 + i]) for i, d in enumerate(devices)]
        draw_curves(ax, [Setting("a", runs)], "eval/return_mean", None)
        titles.append(ax.get_title())
        plt.close(fig)
    assert titles == [
        "Hopper-v4 on NVIDIA H200, CPU (2 cores): 3 runs, up to 2,000 env steps",
        "Hopper-v4: 2 runs, up to 2,000 env steps",
    ]
