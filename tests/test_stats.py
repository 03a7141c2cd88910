"""The reports' statistics against numbers computed here: the bootstrap by hand with the same
generator, cases whose interval is known exactly, and a t interval from scipy.stats.t."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mbrl.tools.stats import (
    CONFIDENCE,
    COVERAGE,
    INTERVAL_SEEDS,
    RESAMPLES,
    bootstrap_interval,
    paired_difference,
    sign_flip_p,
    summarize,
    trailing_mean,
)


def test_the_percentile_bootstrap_is_the_one_done_by_hand() -> None:
    """Resample indices drawn from the same generator, the mean of each resample, then the
    2.5 % and 97.5 % quantiles of those means."""
    x = np.array([224.0, 345.0, 261.0, 1148.0, 266.0, 393.0, 252.0])
    rng = np.random.default_rng(0)
    means = x[rng.integers(0, x.size, (RESAMPLES, x.size))].mean(axis=1)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    assert bootstrap_interval(x) == pytest.approx((low, high), rel=1e-12)
    assert bootstrap_interval(x, seed=1) != bootstrap_interval(x)  # (the generator matters)


def test_the_bootstrap_is_scipys() -> None:
    """The same interval as scipy.stats.bootstrap's percentile method with the same generator
    (the report computes it in numpy: it must not need scipy)."""
    x = np.array([379.0, 189.0, 1004.0, 512.0, 97.0, 640.0])
    res = stats.bootstrap(
        (x,),
        np.mean,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(3),
    )
    ci = res.confidence_interval
    assert bootstrap_interval(x, seed=3) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_intervals_known_exactly() -> None:
    # Every resample of a constant sample has its mean: a zero-width interval there.
    assert bootstrap_interval([1000.0] * 5) == (1000.0, 1000.0)
    # Two values: resample means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the 2.5 % and
    # 97.5 % quantiles of 10 000 of them are 0 and 1.
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="two values or more, got 1"):
        bootstrap_interval([3.0])


def test_a_large_sample_gives_the_t_interval() -> None:
    """n=400: the percentile bootstrap of the mean is within a few % of mean ± t s / sqrt(n)."""
    x = np.random.default_rng(7).normal(300.0, 100.0, 400)
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    low, high = bootstrap_interval(x)
    assert low == pytest.approx(x.mean() - half, abs=0.1 * half)
    assert high == pytest.approx(x.mean() + half, abs=0.1 * half)
    assert (high - low) == pytest.approx(2 * half, rel=0.05)


def test_summary_of_seeds() -> None:
    values = [1.0, 2.0, 4.0, 8.0]
    s = summarize(values)
    assert (s.n, s.mean, s.std) == (4, pytest.approx(15 / 4), pytest.approx(np.std(values, ddof=1)))
    assert s.interval == bootstrap_interval(values)
    one = summarize([5.0])
    assert (one.n, one.mean, one.std, one.interval) == (1, 5.0, 0.0, None)
    assert one.text() == "5 (n=1)" and one.text(signed=True) == "+5 (n=1)"  # (no spread to state)
    # two seeds: no interval (their range is all a percentile bootstrap could give)
    two = summarize([0.0, 1.0])
    assert two.interval is None and two.text() == "0 ± 1 (n=2)"
    assert bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="no values"):
        summarize([])


def test_paired_differences_use_the_seeds_in_both() -> None:
    a = {0: 100.0, 1: 200.0, 2: 300.0}
    b = {1: 150.0, 2: 420.0, 3: 999.0}  # seed 0 only in a, seed 3 only in b
    d = paired_difference(a, b)
    assert d is not None
    assert (d.n, d.mean) == (2, pytest.approx(((150 - 200) + (420 - 300)) / 2))
    assert d.std == pytest.approx(np.std([-50.0, 120.0], ddof=1))
    assert d.interval is None  # (two seeds in both: no interval)
    a[4], b[4] = 10.0, 40.0
    d = paired_difference(a, b)
    assert d is not None and d.interval is None  # (three seeds: their range, not given)
    assert d.text(signed=True) == "+33 ± 85 (n=3)"
    a[5], b[5] = 0.0, -20.0
    d = paired_difference(a, b)
    assert d is not None and d.interval == bootstrap_interval([-50.0, 120.0, 30.0, -20.0])
    low, high = d.interval
    assert d.text(signed=True) == f"+20 ± 74 [{low:+.0f}, {high:+.0f}] (n=4)"
    assert paired_difference({0: 1.0}, {1: 2.0}) is None


def test_trailing_mean() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 1000.0]
    expected = [np.mean(values[max(0, i - 4) : i + 1]) for i in range(len(values))]
    assert trailing_mean(values) == pytest.approx(expected)
    assert trailing_mean(values)[-1] == pytest.approx((30 + 40 + 50 + 60 + 1000) / 5)
    assert trailing_mean(values, window=1) == values
    with pytest.raises(ValueError, match="window 0"):
        trailing_mean(values, window=0)


@pytest.mark.parametrize(
    "diffs",
    [[0, 0, 1, 1, 1, 1, 4, 0], [3, 2, 0, 3, 0, 0, 1], [1.5, -0.5, 2, 3, -1, 0.5], [2, -2, 1, -1]],
)
def test_the_sign_flip_test_is_scipys(diffs: list[float]) -> None:
    """Exact: every sign assignment, as scipy's paired permutation test of one sample."""
    want = stats.permutation_test(
        (np.asarray(diffs, dtype=float),), np.mean, permutation_type="samples", n_resamples=np.inf
    ).pvalue
    assert sign_flip_p(diffs) == pytest.approx(want, abs=1e-12)


def test_the_sign_flip_test_at_many_seeds_and_none() -> None:
    """Past 16 nonzero differences it samples sign assignments: close to the exact p; no
    nonzero difference says nothing (p = 1)."""
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.4, 1.0, 18)
    exact = stats.permutation_test((diffs,), np.mean, permutation_type="samples",
                                   n_resamples=np.inf).pvalue  # fmt: skip
    assert abs(sign_flip_p(diffs) - exact) < 0.02
    assert sign_flip_p([0, 0, 0]) == sign_flip_p([]) == 1.0
    assert sign_flip_p([5.0]) == 1.0  # (one seed: both signs are as extreme)


def test_three_values_give_their_range_and_few_seeds_cover_less_than_95() -> None:
    """At three values a percentile bootstrap is their range (one value repeated is 1/27 of
    the resamples, above the 2.5 % tail): no interval below INTERVAL_SEEDS. Above it, the
    coverage the report's note states, recomputed."""
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(0.0, 1.0, 3)
        assert bootstrap_interval(x) == pytest.approx((x.min(), x.max()), abs=1e-12)
    assert INTERVAL_SEEDS == 4 and summarize([1.0, 2.0, 4.0]).interval is None
    for n, stated in COVERAGE.items():
        draws = np.random.default_rng(n)
        held = [
            low <= 0.0 <= high
            for low, high in (
                bootstrap_interval(draws.normal(0.0, 1.0, n), seed=t) for t in range(2000)
            )
        ]
        assert round(float(np.mean(held)), 2) == stated, n
