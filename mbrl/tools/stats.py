"""Statistics over seeds for the reports (``scripts/seeds.py``, ``scripts/plot.py --per-step``):
the mean ± sample std with n, a 95 % percentile bootstrap interval of the mean, paired
differences by seed, an exact paired sign-flip test for counts by seed, and the trailing mean
that smooths a curve.

The interval is ``scipy.stats.bootstrap(method="percentile")``'s (tests/test_stats.py checks the
two agree to 1e-12), in numpy so that a report needs no scipy; a fixed generator makes a report
written twice read the same. Why not rliable, and an interval at few seeds: docs/usage.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
SMOOTH_WINDOW = 5  # evaluations per trailing mean (one every 1000 steps: 5000 env steps)
# Seeds below which a report gives no interval: at two or three, a percentile bootstrap of the
# mean is the values' range whatever they are (a resample of one value repeated is 1/4 or 1/27
# of them, above the 2.5 % tail), no more than the values themselves. From four on it lies
# inside the range, and is still narrower than its level says (COVERAGE).
INTERVAL_SEEDS = 4
# How often the interval held the mean of standard normal data: 2000 samples of n values each
# (generator seed n, the sample's index as the bootstrap's), tests/test_stats.py recomputes it.
# A percentile bootstrap at few values is narrow (docs/usage.md)
COVERAGE = {3: 0.75, 4: 0.79, 5: 0.85, 10: 0.91}


@dataclass(frozen=True)
class Summary:
    """Values over seeds: n, mean, sample std (ddof 1; 0 for one value) and the bootstrap
    interval of the mean (None below INTERVAL_SEEDS values)."""

    n: int
    mean: float
    std: float
    interval: tuple[float, float] | None

    def text(self, signed: bool = False) -> str:
        """``379 ± 286 [214, 551] (n=10)``; ``signed`` (a difference): ``-119 ± 212 [-250,
        +12] (n=10)``; one seed: ``379 (n=1)``."""
        fmt = "{:+.0f}" if signed else "{:.0f}"
        if self.n == 1:  # (one seed has no spread to state: its std is undefined)
            return f"{fmt.format(self.mean)} (n=1)"
        head = f"{fmt.format(self.mean)} ± {self.std:.0f}"
        if self.interval is not None:
            head += " [{}, {}]".format(*(fmt.format(v) for v in self.interval))
        return f"{head} (n={self.n})"

    def as_dict(self) -> dict[str, object]:
        low, high = self.interval or (None, None)
        return {"n": self.n, "mean": self.mean, "std": self.std, "low": low, "high": high}


def bootstrap_interval(values: Sequence[float] | np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (at least two)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        raise ValueError(f"a bootstrap interval needs two values or more, got {x.size}")
    # Each resample: x.size indices drawn with replacement; its mean; then the quantiles.
    draws = np.random.default_rng(seed).integers(0, x.size, (RESAMPLES, x.size))
    means = x[draws].mean(axis=1)
    alpha = (1 - CONFIDENCE) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def summarize(values: Sequence[float] | np.ndarray) -> Summary:
    """n, mean, sample std and the bootstrap interval of ``values`` (one per seed)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to summarize")
    std = float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    interval = bootstrap_interval(x) if x.size >= INTERVAL_SEEDS else None
    return Summary(int(x.size), float(x.mean()), std, interval)


def paired_difference(a: Mapping[int, float], b: Mapping[int, float]) -> Summary | None:
    """``b - a`` over the seeds present in both (seed -> value); None when they share none."""
    common = sorted(set(a) & set(b))
    return summarize([b[s] - a[s] for s in common]) if common else None


EXACT_FLIPS = 16  # nonzero differences up to which every sign assignment is enumerated


def sign_flip_p(diffs: Sequence[float] | np.ndarray, seed: int = 0) -> float:
    """Two-sided p of the paired sign-flip (permutation) test that the mean of ``diffs`` (one
    per seed: b - a) is 0: the share of sign assignments whose |mean| is at least the one
    observed. Exact (every assignment) up to :data:`EXACT_FLIPS` nonzero differences, else
    :data:`RESAMPLES` random ones. The seed is the unit: evaluations of one seed are not
    independent draws, so counts are compared as each seed's total, never pooled."""
    x = np.asarray(diffs, dtype=float)
    x = x[x != 0]  # (a zero's sign changes nothing)
    if x.size == 0:
        return 1.0
    if x.size <= EXACT_FLIPS:
        signs = 1 - 2 * ((np.arange(2**x.size)[:, None] >> np.arange(x.size)) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1, 1], (RESAMPLES, x.size))
    sums = np.abs(signs @ x)
    return float(np.mean(sums >= abs(x.sum()) * (1 - 1e-12)))


def trailing_mean(values: Sequence[float], window: int = SMOOTH_WINDOW) -> list[float]:
    """Each value replaced by the mean of it and the ``window - 1`` before it (fewer at the
    start): how a curve is smoothed to sit beside a published curve that was smoothed."""
    if window < 1:
        raise ValueError(f"window {window}: give 1 or more")
    x = np.asarray(values, dtype=float)
    return [float(x[max(0, i - window + 1) : i + 1].mean()) for i in range(x.size)]
