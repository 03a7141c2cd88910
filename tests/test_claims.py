"""The learning claims of the README and docs/results.md recomputed from the committed
metrics bundles (docs/ab, docs/gpu): the Hopper stand-still counts of E2 and E3 by seed, with
their paired p-values; the GPU table's smoothed means, counts and paired difference; the CPU
runs past 16 000 (with docs/hopper.md's reading of the two to 50 000); the pendulums'
MBPO-against-SAC counts and means. A changed bundle or a changed sentence fails here."""

from __future__ import annotations

import json
import os
import tarfile

import numpy as np
from scipy.stats import bootstrap, permutation_test

from mbrl.tools.plotting import load_reference
from mbrl.tools.seed_tables import reference_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
E2 = os.path.join(ROOT, "docs", "ab", "e2_sac_cpu", "metrics.tar.gz")
E3 = os.path.join(ROOT, "docs", "ab", "e3_v4_v5_cpu", "metrics.tar.gz")
PENDULUMS = os.path.join(ROOT, "docs", "ab", "pendulums_cpu")
LONG = os.path.join(ROOT, "docs", "ab", "long_v4_cpu", "metrics.tar.gz")  # seeds 5-8
PAIRS = os.path.join(ROOT, "docs", "ab", "flow_gauss_cpu", "metrics.tar.gz")  # both models
REFERENCE = os.path.join(ROOT, "docs", "reference", "mbpo_hopper.csv")
GPU = [  # the ten-seed H200 table: seeds 0-4, then 5-9
    os.path.join(ROOT, "docs", "gpu", day, "seeds", "metrics.tar.gz")
    for day in ("2026-11-26-h200", "2026-11-26-h200-2")
]
SAC = "algorithm-sac_algorithm.updates_per_step-20_agent.target_entropy--1"
WINDOW = range(6000, 10001, 1000)  # after Hopper's 5000 random steps, to the A/Bs' end
LIMIT = 1000  # Hopper's episode length limit


def evaluations(bundle: str, variant: str) -> dict[int, dict[int, tuple[float, float]]]:
    """Per seed of the variant: step -> (return, mean episode length), read from each run's
    metrics.jsonl in the bundle."""
    seeds = {}
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if parts[-1] != "metrics.jsonl" or parts[-3] != variant:
                continue
            f = tar.extractfile(member)
            assert f is not None
            rows = [json.loads(line) for line in f.read().decode().splitlines()]
            seeds[int(parts[-2].removeprefix("seed_"))] = {
                r["step"]: (r["eval/return_mean"], r["eval/episode_length_mean"])
                for r in rows
                if r.get("eval/return_mean") is not None
            }
    return seeds


def full_length(bundle: str, variant: str, seeds: range) -> list[int]:
    """Per seed in ``seeds``: its evaluations in WINDOW whose every episode ran LIMIT steps."""
    runs = evaluations(bundle, variant)
    return [sum(runs[seed][step][1] >= LIMIT for step in WINDOW) for seed in seeds]


def over_seeds(values: list[float], signed: bool = False) -> str:
    """``mean ± std [low, high] (n=N)`` as the README writes a value over seeds, its interval
    scipy's percentile bootstrap with the reports' generator (seed 0, 10 000 resamples)."""
    x = np.asarray(values, dtype=float)
    ci = bootstrap((x,), np.mean, n_resamples=10_000, method="percentile",
                   rng=np.random.default_rng(0)).confidence_interval  # fmt: skip
    f = "{:+.0f}" if signed else "{:.0f}"
    low, high = f.format(ci.low), f.format(ci.high)
    return _minus(f"{f.format(x.mean())} ± {np.std(x, ddof=1):.0f} [{low}, {high}] (n={x.size})")


def page_text(page: str) -> str:
    """A page of the repository with its line breaks and runs of spaces as single spaces."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return " ".join(f.read().split())


def readme_text() -> str:
    return page_text("README.md")


def p_value(a: list[int], b: list[int]) -> str:
    """The paired sign-flip test of b - a by seed (scipy's permutation test, every sign
    assignment), as the README rounds it."""
    d = np.subtract(b, a).astype(float)
    if not d.any():
        return "1"
    test = permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf)
    return f"{test.pvalue:.2g}"


def test_the_readmes_stand_still_counts_are_the_bundles() -> None:
    e2, e3 = range(8), range(7)  # E3's pairs: seeds 0-6; E2 has more
    sac, gauss = full_length(E2, SAC, e2), full_length(E2, "model-gaussian", e2)
    sac_e3 = full_length(E2, SAC, e3)
    v4 = full_length(E3, "model-gaussian_env.version-v4", e3)
    v5 = full_length(E3, "model-gaussian_env.version-v5", e3)
    assert v4 == full_length(E2, "model-gaussian", e3)  # E3's v4 arm: E2's Gaussian arm
    mbrl_lib = []  # mbrl-lib 0.2.0's own MBPO (docs/hopper.md), 3 seeds
    for seed in range(3):
        path = os.path.join(
            ROOT, "docs", "reference", "mbrl_lib_hopper", f"seed_{seed}.evals.jsonl"
        )
        with open(path, encoding="utf-8") as f:
            mbrl_lib += [json.loads(line)["lengths"] for line in f]
    full = sum(min(lengths) >= LIMIT for lengths in mbrl_lib)

    def seeds_with(counts: list[int]) -> str:
        return f"{sum(c > 0 for c in counts)} of {len(counts)} seeds"

    readme = readme_text()
    for sentence in [
        f"mbrl-lib's own MBPO {full} of {len(mbrl_lib)} over 3 seeds",
        f"SAC alone at MBPO's 20 updates per step {sum(sac)} of 40 ({seeds_with(sac)}), "
        f"Gaussian MBPO on Hopper-v4 {sum(gauss)} of 40 ({seeds_with(gauss)}; paired by seed, "
        f"sign-flip p = {p_value(sac, gauss)} against SAC)",
        f"{sum(v5)} of 35 over seeds 0–6 ({seeds_with(v5)}; p = {p_value(sac_e3, v5)} against "
        f"SAC's {sum(sac_e3)} of 35 there, p = {p_value(v4, v5)} against v4's {sum(v4)} of 35)",
    ]:
        assert sentence in readme, sentence


def test_the_two_seeds_to_50000_are_the_bundle() -> None:
    """Seeds 5 and 6, the two Hopper-v4 Gaussian runs to 50 000: docs/results.md's smoothed
    figures there, docs/hopper.md's reading of each seed."""
    readme, hopper = page_text("docs/results.md"), page_text("docs/hopper.md")
    long = evaluations(LONG, "model-gaussian")
    assert sorted(long) == [5, 6, 7, 8] and min(max(long[s]) for s in (5, 6)) == 50000
    last5 = {s: np.mean([long[s][t][0] for t in range(46000, 50001, 1000)]) for s in (5, 6)}
    mbpo = reference_text(load_reference(REFERENCE), 50000)  # every published step: no gap
    assert f"two of them to 50 000, smoothed {last5[6]:.0f} and {last5[5]:.0f} there" in readme
    assert f"against MBPO's {mbpo} (two seeds: no interval)" in readme
    hops = [long[6][t] for t in range(33000, 47001, 1000)]
    high = [(r, n) for r, n in hops if n >= 0.75 * LIMIT]  # long episodes, far above ~1000
    (r_lo, n_lo), (r_hi, n_hi) = np.min(high, axis=0), np.max(high, axis=0)
    assert (
        f"{len(high)} of its {len(hops)} evaluations over 33 000–47 000 scored "
        f"{r_lo:.0f}–{r_hi:.0f}, hopping for {n_lo:.0f}–{n_hi:.0f} steps an episode on average"
    ) in hopper
    assert all(abs(long[6][t][0] - LIMIT) < 0.1 * LIMIT for t in (48000, 49000, 50000))
    low = [long[5][t] for t in range(18000, 46001, 1000)]
    falls = [r for r, n in low if n < LIMIT]
    (once,) = [r for r, n in low if n == LIMIT]
    late = [long[5][t][0] for t in range(47000, 50001, 1000)]
    assert (
        f"Over 18 000–46 000 it hops for {min(n for _, n in low if n < LIMIT):.0f}–"
        f"{max(n for _, n in low if n < LIMIT):.0f} steps and falls ({min(falls):.0f}–"
        f"{max(falls):.0f}; once, at 26 000, {once:.0f} in 1000-step episodes)"
    ) in hopper
    assert f"at 47 000–50 000 it reaches {min(late):.0f}–{max(late):.0f}" in hopper


def _thousands(step: int) -> str:
    return f"{step:,}".replace(",", " ")


def _spans(steps: list[int]) -> str:
    """[21000, 22000, 23000, 30000] as "21 000–23 000 and 30 000"."""
    runs: list[list[int]] = []
    for step in steps:
        if runs and step - runs[-1][-1] == 1000:
            runs[-1].append(step)
        else:
            runs.append([step])
    parts = [
        _thousands(r[0]) if len(r) == 1 else f"{_thousands(r[0])}–{_thousands(r[-1])}" for r in runs
    ]
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def test_the_readmes_four_seed_hopper_claim_is_the_bundle() -> None:
    """Seeds 5-8 smoothed as the published curve is (each seed's mean of its last 5
    evaluations after the random steps), mean ± sample std [bootstrap interval] (n) at the
    furthest evaluation all four reached; the evaluations from 12 000 to there at which MBPO's
    mean lies outside the interval, and the one it lies furthest outside."""
    from mbrl.tools.stats import bootstrap_interval

    long, mbpo = evaluations(LONG, "model-gaussian"), load_reference(REFERENCE)
    assert sorted(long) == [5, 6, 7, 8]
    furthest = min(max(e) for e in long.values())
    reached = sorted(max(e) for e in long.values())  # (the last evaluation of each)

    def smoothed(step: int) -> list[float]:
        out = []
        for seed in sorted(long):
            last = [t for t in sorted(long[seed]) if 5000 < t <= step][-5:]
            out.append(float(np.mean([long[seed][t][0] for t in last])))
        return out

    def mean_at(step: int) -> float:
        return float(np.interp(step, mbpo.steps, mbpo.mean))

    there = smoothed(furthest)
    lo, hi = bootstrap_interval(there)
    text = (
        f"four seeds to {_thousands(reached[0])}–{_thousands(reached[-1])} steps, smoothed over "
        f"seeds {np.mean(there):.0f} ± {np.std(there, ddof=1):.0f} [{lo:.0f}, {hi:.0f}] (n=4) "
        f"at {_thousands(furthest)} against MBPO's {reference_text(mbpo, furthest)}"
    )
    assert text in page_text("docs/results.md"), text
    outside: dict[int, float] = {}  # step -> how far outside, in the interval's widths
    for step in range(12000, furthest + 1, 1000):
        lo, hi = bootstrap_interval(smoothed(step))
        if not lo <= mean_at(step) <= hi:
            outside[step] = max(lo - mean_at(step), mean_at(step) - hi) / (hi - lo)
    text = f"its mean inside the interval at every evaluation from 12 000 to {_thousands(furthest)}"
    if outside:
        worst = max(outside, key=outside.__getitem__)
        values = smoothed(worst)
        lo, hi = bootstrap_interval(values)
        text += (
            f" but {_spans(sorted(outside))} (at {_thousands(worst)}: {np.mean(values):.0f} ± "
            f"{np.std(values, ddof=1):.0f} [{lo:.0f}, {hi:.0f}] (n={len(values)}) against "
            f"{mean_at(worst):.0f})"
        )
    assert text in page_text("docs/results.md"), text


def _minus(text: str) -> str:
    return text.replace("-", "−")


def test_the_readmes_pendulum_claims_are_the_bundles() -> None:
    def returns(env: str, algorithm: str, step: int) -> list[float]:
        bundle = os.path.join(PENDULUMS, env, "metrics.tar.gz")
        runs = evaluations(bundle, f"algorithm-{algorithm}")
        assert sorted(runs) == [0, 1, 2, 3, 4]
        return [runs[seed][step][0] for seed in sorted(runs)]

    def solved(env: str, algorithm: str, step: int, target: float) -> int:
        return sum(r >= target for r in returns(env, algorithm, step))

    def mean_std(env: str, algorithm: str, step: int) -> str:
        return over_seeds(returns(env, algorithm, step)).removesuffix(" (n=5)")

    readme = readme_text()
    # the targets: Pendulum -250, InvertedPendulum 900 (docs/results.md)
    assert solved("pendulum", "mbpo", 2000, -250) == 4
    assert solved("pendulum", "mbpo", 3000, -250) == 5
    assert solved("inverted_pendulum", "mbpo", 2000, 900) == 5
    assert (
        solved("pendulum", "sac", 3000, -250) == solved("inverted_pendulum", "sac", 3000, 900) == 0
    )

    def paired(env: str) -> str:  # SAC − MBPO, each seed's mean over 2000-3000
        sac, mbpo = (np.array([returns(env, a, s) for s in (2000, 3000)]) for a in ("sac", "mbpo"))
        diff = (sac - mbpo).mean(axis=0)
        return over_seeds(list(diff), signed=True).removesuffix(" (n=5)")

    with open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8") as f:
        results = " ".join(f.read().split())
    assert f"over 2000–3000: Pendulum {paired('pendulum')}" in results
    assert f"InvertedPendulum {paired('inverted_pendulum')}" in results
    for sentence in [
        "solved Pendulum (≥ −250) by 2000 steps in 4 of 5 seeds and by 3000 in 5 of 5 "
        f"({mean_std('pendulum', 'mbpo', 3000)})",
        "InvertedPendulum (≥ 900) by 2000 in 5 of 5, where SAC solved neither in any seed by "
        f"3000 ({mean_std('pendulum', 'sac', 3000)}",
        f"and {mean_std('inverted_pendulum', 'sac', 3000)};",
    ]:
        assert sentence in readme


def test_the_readmes_gpu_table_is_the_bundles() -> None:
    """Each smoothed cell (a seed's mean over its last 5 evaluations after the random steps,
    then mean ± sample std over the seeds), the full-length and stand-still counts, and the
    flow-minus-Gaussian difference paired by seed."""
    runs = {
        model: {s: e for bundle in GPU for s, e in evaluations(bundle, f"model-{model}").items()}
        for model in ("gaussian", "flow")
    }
    assert sorted(runs["gaussian"]) == sorted(runs["flow"]) == list(range(10))
    after = [6000, 7000, 8000, 9000]  # Hopper's random steps end at 5000

    def smoothed(seed_evals: dict[int, tuple[float, float]], step: int) -> float:
        done = [seed_evals[s][0] for s in after if s <= step]
        return float(np.mean(done[-5:]))

    def cell_of(values: list[float]) -> str:
        return over_seeds(values) if values else ""

    readme = readme_text()
    for step in after:
        cells = readme.split(f"| {step:,} | ", 1)[1].split(" |")  # gaussian, flow, MBPO
        for model, cell in zip(("gaussian", "flow"), cells[:2], strict=True):
            values = [smoothed(e, step) for e in runs[model].values() if step in e]
            assert cell.strip() == (cell_text := cell_of(values)), (step, model, cell_text)
        # "the Gaussian's interval lies above MBPO's band at every step": its lower end above
        # the published mean + std (the table's last column)
        low = float(cells[0].split("[", 1)[1].split(",", 1)[0])
        mean, std = (float(x) for x in cells[2].split("±"))
        assert low > mean + std, (step, low, mean + std)

    def counts(model: str) -> tuple[int, int, int]:
        at = [e[s] for e in runs[model].values() for s in after if s in e]
        full = [(r, n) for r, n in at if n >= LIMIT]
        return len(full), sum(abs(r - LIMIT) <= 0.05 * LIMIT for r, _ in full), len(at)

    (g_full, g_still, g_all), (f_full, f_still, f_all) = counts("gaussian"), counts("flow")
    gauss = f"in 1000-step episodes ({g_full} of its {g_all} evaluations; {g_still} of them"
    assert gauss in readme
    assert f"({f_full} of {f_all} in 1000-step episodes, {f_still} still)" in readme
    paired = [
        np.mean([f[s][0] - g[s][0] for s in after if s in f and s in g])
        for g, f in ((runs["gaussian"][seed], runs["flow"][seed]) for seed in range(10))
    ]
    diff = over_seeds([float(p) for p in paired], signed=True)
    assert f"Flow − Gaussian, paired by seed over 6000–8000: {diff}: no difference" in readme
    # docs/hopper.md's cut: the pairs in which neither run ran 1000-step episodes
    from mbrl.tools.stats import summarize

    window = [6000, 7000, 8000]
    kept = {
        seed: [
            f[s][0] - g[s][0] for s in window if s in f and s in g and max(f[s][1], g[s][1]) < LIMIT
        ]
        for seed, (g, f) in enumerate((runs["gaussian"][k], runs["flow"][k]) for k in range(10))
    }
    pairs = sum(len(d) for d in kept.values())
    both = sum(s in runs["flow"][k] and s in runs["gaussian"][k] for k in range(10) for s in window)
    cut = summarize([float(np.mean(d)) for d in kept.values() if d]).text(signed=True)
    sentence = f"({pairs} of the {both} pairs stay), flow − Gaussian = {_minus(cut)}"
    assert sentence in page_text("docs/hopper.md"), sentence
    assert f"both its runs made there: {both} pairs" in readme


def test_the_readmes_walker_line_is_the_bundle() -> None:
    """The two Walker2d-v4 seeds: how far each went, each smoothed at 50 000 beside MBPO's
    published curve, seed 1's bursts, seed 0 below the band from 53 000; and MBPO's Hopper
    figures the README's "Not known" names."""
    walker = os.path.join(ROOT, "docs", "ab", "walker_v4_cpu", "metrics.tar.gz")
    runs = evaluations(walker, "model-gaussian")
    ref = load_reference(os.path.join(ROOT, "docs", "reference", "mbpo_walker2d.csv"))
    readme = page_text("docs/results.md")  # (the README points there)

    def smoothed(seed: int, step: int) -> float:
        last = [t for t in sorted(runs[seed]) if 5000 < t <= step][-5:]
        return float(np.mean([runs[seed][t][0] for t in last]))

    ends = [_thousands(max(runs[s])) for s in (0, 1)]
    assert f"to {ends[0]} and {ends[1]} steps" in readme
    s0, s1, mbpo = smoothed(0, 50000), smoothed(1, 50000), reference_text(ref, 50000)
    assert (
        f"smoothed at 50 000, seed 0 at {s0:.0f} and seed 1 at {s1:.0f}, against MBPO's " in readme
    )
    assert f"published {mbpo} there" in readme
    (burst,) = [(t, r) for t, (r, _) in runs[1].items() if r >= 3000]  # ("a single")
    assert burst[0] == 53000 and f"smoothed {smoothed(1, 44000):.0f} at 44 000, a single " in readme
    assert f"a single {burst[1]:.0f} at 53 000" in readme

    def band_low(step: int) -> float:
        return float(np.interp(step, ref.steps, ref.mean) - np.interp(step, ref.steps, ref.std))

    below = [t for t in sorted(runs[0]) if t >= 50000 and smoothed(0, t) < band_low(t)]
    assert (
        below == list(range(53000, max(runs[0]) + 1, 1000))
        and "below the band from 53 000" in readme
    )
    assert f"({np.interp(100000, ref.steps, ref.mean):.0f} at 100 000)" in readme
    # docs/results.md: each seed's smoothed evaluations from 16 000 on inside MBPO's band
    inside = {}
    for seed in (0, 1):
        steps = [t for t in sorted(runs[seed]) if t >= 16000]
        mean, std = np.interp(steps, ref.steps, ref.mean), np.interp(steps, ref.steps, ref.std)
        near = [abs(smoothed(seed, t) - m) <= sd for t, m, sd in zip(steps, mean, std, strict=True)]
        inside[seed] = f"{sum(near)} of its {len(steps)}"
    results = page_text("docs/results.md")
    assert f"seed 0 lies within MBPO's published mean ± std at {inside[0]}," in results
    assert f"seed 1 at {inside[1]}," in results
    hopper = load_reference(REFERENCE)
    at = (reference_text(hopper, 40000), reference_text(hopper, 50000))
    assert f"between 40 000 and 50 000 steps ({at[0]}, then {at[1]})" in readme_text()


def test_hopper_md_e2_cut_is_the_bundle() -> None:
    """docs/hopper.md's E2 reading: SAC alone − Gaussian MBPO over 6000-10 000, paired by seed,
    leaving out every pair in which either run ran 1000-step episodes (a post-hoc cut)."""
    from mbrl.tools.stats import summarize

    gauss, sac = evaluations(E2, "model-gaussian"), evaluations(E2, SAC)
    both = [(seed, s) for seed in sorted(gauss) if seed in sac for s in WINDOW]
    both = [(seed, s) for seed, s in both if s in gauss[seed] and s in sac[seed]]
    kept: dict[int, list[float]] = {}
    for seed, s in both:
        (g, g_len), (r, r_len) = gauss[seed][s], sac[seed][s]
        if max(g_len, r_len) < LIMIT:
            kept.setdefault(seed, []).append(r - g)
    cut = summarize([float(np.mean(d)) for d in kept.values()]).text(signed=True)
    pairs = sum(len(d) for d in kept.values())
    sentence = f"({pairs} of {len(both)} stay), SAC − Gaussian = {_minus(cut)}"
    assert sentence in page_text("docs/hopper.md"), sentence


def test_the_readmes_cpu_flow_line_is_the_bundle() -> None:
    """The six CPU seeds run with both models: each seed's mean flow − Gaussian difference
    over the evaluations both its runs made after the random steps, then over seeds."""
    from mbrl.tools.stats import summarize

    gauss, flow = evaluations(PAIRS, "model-gaussian"), evaluations(PAIRS, "model-flow")
    assert sorted(gauss) == sorted(flow) == [0, 1, 2, 5, 6, 7]
    steps = {k: [s for s in flow[k] if s > 5000 and s in gauss[k]] for k in flow}
    diffs = [
        float(np.mean([flow[k][s][0] - gauss[k][s][0] for s in steps[k]])) for k in sorted(flow)
    ]
    last = sorted({max(v) for v in steps.values()})
    first, end = (_thousands(n) if n >= 10000 else str(n) for n in (last[0], last[-1]))
    span = f"from 6000 to {first}–{end}"
    text = _minus(summarize(diffs).text(signed=True))
    assert f"{span}; [docs/hopper.md](hopper.md)): flow − Gaussian {text}" in page_text(
        "docs/results.md"
    )
    assert f"**{text}**: no difference established" in page_text("docs/hopper.md")
    # the windows as every page names them (they grow as the runs are continued)
    counts = sorted(len(v) for v in steps.values())
    fewest, most = counts[0], counts[-1]
    assert f"whatever its window ({fewest} to {most} evaluations)" in page_text("docs/results.md")

    def named(count: int) -> str:  # (the seeds whose window holds ``count`` evaluations)
        ks = [str(k) for k in sorted(steps) if len(steps[k]) == count]
        return f"seed{'s' * (len(ks) > 1)} {' and '.join(ks)}"

    hopper = page_text("docs/hopper.md")
    assert f"(after the random steps, from 6000 to {first}–{end}, by seed)" in hopper
    assert (
        f"its window ({fewest} evaluations for {named(fewest)}, {most} for {named(most)})" in hopper
    )
    assert f"over six paired seeds to {end}," in page_text("README.md")
