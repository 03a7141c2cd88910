"""The tables of ``scripts/seeds.py``'s report and of ``scripts/plot.py --per-step``: per
variant and evaluated env step, the evaluation return over seeds (mean ± std, bootstrap
interval, n) with its stand-still counts; the same smoothed, beside a published curve; and the
paired differences between variants by seed (the statistics: stats.py).

Stand-still counts, where an env ends a fallen episode and pays an alive bonus (docs/usage.md):
*full-length*, an evaluation whose episodes all ran the env's limit; *still*, one of those
within ``STILL_TOLERANCE`` of the alive bonus times that length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from mbrl.envs import env_spec, episode_limit, termination
from mbrl.envs.make import alive_bonus
from mbrl.tools.plotting import Reference, Run, Setting
from mbrl.tools.stats import Summary, paired_difference, sign_flip_p, summarize, trailing_mean

STILL_TOLERANCE = 0.05  # |return - bonus x length| <= 5 % of bonus x length
RETURN, LENGTH = "eval/return_mean", "eval/episode_length_mean"


@dataclass
class Evaluation:
    """One run's evaluation at one step."""

    seed: int | None
    ret: float
    smoothed: float | None  # trailing mean of the run's evaluations after its random steps
    full: bool | None  # every episode ran the env's limit (None: the env cannot stand still)
    still: bool | None  # full, for about the alive bonus alone


@dataclass
class Cell:
    """One variant at one evaluated step: its seeds' evaluations."""

    evals: list[Evaluation] = field(default_factory=list)

    def summary(self) -> Summary:
        return summarize([e.ret for e in self.evals])

    def smoothed(self) -> Summary | None:
        values = [e.smoothed for e in self.evals if e.smoothed is not None]
        return summarize(values) if values else None

    def counts(self) -> tuple[int, int] | None:
        """(full-length, still) evaluations; None where the env cannot stand still."""
        if any(e.full is None for e in self.evals):
            return None
        return sum(bool(e.full) for e in self.evals), sum(bool(e.still) for e in self.evals)


def stands_still(ret: float, length: float, limit: int, bonus: float) -> bool:
    """An evaluation whose episodes all ran to the limit for about the alive bonus alone."""
    return length >= limit and abs(ret - bonus * length) <= STILL_TOLERANCE * bonus * length


@lru_cache
def _rule(name: str, version: str | None, steps: int | None) -> tuple[int, float] | None:
    """(episode limit, alive bonus) of an env where a body can stand still, else None."""
    if env_spec(name).termination_fn is termination.never:
        return None
    bonus = alive_bonus(name, version)
    return None if bonus is None else (episode_limit(name, version, steps), bonus)


def _run_rule(run: Run) -> tuple[int, float] | None:
    """The stand-still rule of the run's env (None: no env in its config, or one whose
    plug-in is not loaded here, so no counts rather than a wrong one)."""
    name, version = run.config.get("env.name"), run.config.get("env.version")
    steps = run.config.get("env.max_episode_steps")
    if name is None:
        return None
    limit = None if steps is None else int(str(steps))
    try:
        return _rule(str(name), None if version is None else str(version), limit)
    except KeyError:
        return None


def evaluations(run: Run) -> dict[int, Evaluation]:
    """Evaluated step -> the run's evaluation there (the last row of a step logged twice)."""
    rule, seed = _run_rule(run), run.config.get("seed")
    init = int(str(run.config.get("algorithm.init_steps", 0)))
    rows = {int(r["step"]): r for r in run.rows if r.get(RETURN) is not None}
    learning = [step for step in sorted(rows) if step > init]
    smooth = dict(zip(learning, trailing_mean([rows[k][RETURN] for k in learning]), strict=True))
    out = {}
    for step in sorted(rows):
        ret, length = float(rows[step][RETURN]), float(rows[step].get(LENGTH, 0.0))
        full = None if rule is None else length >= rule[0]
        still = None if rule is None else stands_still(ret, length, *rule)
        s = None if seed is None else int(str(seed))
        out[step] = Evaluation(s, ret, smooth.get(step), full, still)
    return out


def cells(runs: list[Run]) -> dict[int, Cell]:
    """Evaluated step -> the cell of these runs (the seeds of one variant)."""
    out: dict[int, Cell] = {}
    for run in runs:
        for step, ev in evaluations(run).items():
            out.setdefault(step, Cell()).evals.append(ev)
    return dict(sorted(out.items()))


def _cell_text(cell: Cell | None) -> str:
    if cell is None:  # (no seed of this variant evaluated at that step)
        return ""
    counts = cell.counts()
    more = "" if counts is None else f", full-length {counts[0]}, still {counts[1]}"
    return cell.summary().text() + more


def _markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def step_table(settings: list[Setting]) -> str:
    """A row per evaluated step, a column per variant: the raw evaluations over seeds."""
    per = [cells(s.runs) for s in settings]
    steps = sorted({k for c in per for k in c})
    rows = [[f"{step:,}", *(_cell_text(c.get(step)) for c in per)] for step in steps]
    return _markdown(["env steps", *(s.label for s in settings)], rows)


def smoothed_table(settings: list[Setting], reference: Reference | None) -> str:
    """Each seed's trailing mean over its evaluations after the random steps, over seeds,
    beside the reference at the same step."""
    per = [cells(s.runs) for s in settings]
    steps = sorted({k for c in per for k, cell in c.items() if cell.smoothed() is not None})
    if not steps:  # (as the paired table says it)
        return "none yet: no run has been evaluated past the random steps"
    head = ["env steps", *(f"{s.label}, smoothed" for s in settings)]
    if reference is not None:
        head.append(f"{reference.label} (published)")
    rows = []
    for step in steps:
        smooth = [c[step].smoothed() if step in c else None for c in per]
        row = [f"{step:,}", *("" if sm is None else sm.text() for sm in smooth)]
        rows.append(row + ([reference_text(reference, step)] if reference is not None else []))
    return _markdown(head, rows)


def reference_text(ref: Reference, step: int) -> str:
    """The reference at ``step`` (interpolated; its points lie a few steps off a round
    number, e.g. 6019, so a step up to 50 before its first point takes that point)."""
    if step < ref.steps[0] - 50 or step > ref.steps[-1]:
        return ""
    mean, std = np.interp(step, ref.steps, ref.mean), np.interp(step, ref.steps, ref.std)
    return f"{mean:.0f} ± {std:.0f}"


def _seed_values(cell: Cell) -> dict[int, float]:
    """seed -> return of the cell's learning evaluations (after the random steps), for the
    seeds that appear once (a seed twice in one variant cannot be paired)."""
    evals = [e for e in cell.evals if e.seed is not None and e.smoothed is not None]
    seeds = [e.seed for e in evals]
    return {e.seed: e.ret for e in evals if e.seed is not None and seeds.count(e.seed) == 1}


Overall = tuple[Summary, int, int, float]  # over seeds, the first and last step, sign-flip p


def paired(settings: list[Setting]) -> dict[str, tuple[dict[int, Summary], Overall | None]]:
    """Per variant after the first, ``label - first label`` -> (step -> the paired difference
    over the seeds both evaluated there after the random steps; each seed's mean difference
    over those steps, summarized over seeds, with the first and last of the steps)."""
    per = [cells(s.runs) for s in settings]
    out: dict[str, tuple[dict[int, Summary], Overall | None]] = {}
    for s, c in zip(settings[1:], per[1:], strict=True):
        diffs: dict[int, Summary] = {}
        by_seed: dict[int, list[float]] = {}  # seed -> its differences, step by step
        for step in sorted(set(per[0]) & set(c)):
            a, b = _seed_values(per[0][step]), _seed_values(c[step])
            d = paired_difference(a, b)
            if d is None:
                continue
            diffs[step] = d
            for seed in set(a) & set(b):
                by_seed.setdefault(seed, []).append(b[seed] - a[seed])
        means = [float(np.mean(v)) for v in by_seed.values()]
        overall = (summarize(means), min(diffs), max(diffs), sign_flip_p(means)) if means else None
        out[f"{s.label} − {settings[0].label}"] = (diffs, overall)
    return out


Counts = dict[int, tuple[int, int]]  # seed -> its (full-length, still) evaluations


@dataclass
class PairedCounts:
    """Two variants' full-length and still evaluations by seed, over the steps and seeds
    :func:`paired` compares."""

    first: Counts = field(default_factory=dict)  # the first variant's
    other: Counts = field(default_factory=dict)
    steps: list[int] = field(default_factory=list)


def paired_counts(settings: list[Setting]) -> dict[str, PairedCounts]:
    """Per variant after the first, its label -> its counts beside the first variant's (none
    where the env cannot stand still)."""
    per = [cells(s.runs) for s in settings]
    out: dict[str, PairedCounts] = {}
    for s, c in zip(settings[1:], per[1:], strict=True):
        found = PairedCounts()
        for step in sorted(set(per[0]) & set(c)):
            a, b = _seed_flags(per[0][step]), _seed_flags(c[step])
            if set(a) & set(b):
                found.steps.append(step)
            for seed in set(a) & set(b):
                for counts, (full, still) in ((found.first, a[seed]), (found.other, b[seed])):
                    n = counts.get(seed, (0, 0))
                    counts[seed] = (n[0] + full, n[1] + still)
        if found.steps:
            out[s.label] = found
    return out


def _seed_flags(cell: Cell) -> dict[int, tuple[bool, bool]]:
    """seed -> (full-length, still) of :func:`_seed_values`' evaluations (none where the env
    cannot stand still)."""
    values = _seed_values(cell)
    return {
        e.seed: (bool(e.full), bool(e.still))
        for e in cell.evals
        if e.seed in values and e.full is not None
    }


def counts_table(labels: tuple[str, str], found: PairedCounts) -> str:
    """A row per count and variant, a column per seed (the seed is the unit: one seed's
    evaluations are not independent); then the total, the seeds with any, and on the second
    variant's row the per-seed difference and the two-sided p of its paired sign-flip test."""
    seeds = sorted(found.first)
    head = ["evaluations", *(f"seed {s}" for s in seeds), "all", "seeds with any"]
    rows = []
    for i, name in enumerate(("full-length", "still")):
        x, y = ([c[s][i] for s in seeds] for c in (found.first, found.other))
        d = [v - u for u, v in zip(x, y, strict=True)]
        diff = summarize(d)
        for label, n in zip(labels, (x, y), strict=True):
            rows.append([f"{name}, {label}", *map(str, n), str(sum(n)), str(sum(v > 0 for v in n))])
        rows[-2] += ["", ""]
        rows[-1] += [f"{diff.mean:+.2f} ± {diff.std:.2f}", f"{sign_flip_p(d):.2g}"]
    return _markdown([*head, "difference per seed (mean ± std)", "sign-flip p"], rows)


def _verdict(summary: Summary) -> str:
    """What the overall difference's interval says, in words."""
    if summary.interval is None:
        return ": too few seeds for an interval, so no difference can be established"
    low, high = summary.interval
    if low <= 0 <= high:
        return ": the interval holds 0, no difference established"
    return f": the interval excludes 0 ({'above' if low > 0 else 'below'} it)"


def _sign_flip_text(p: float, n: int) -> str:
    """The paired sign-flip test's p, and where it is the least that n seeds can give (2 of
    the 2^n sign assignments are always as extreme as the one seen): a bootstrap interval
    of few seeds is narrow (it covers ~79 % at n=4), and this says how little n can show."""
    if n < 2:
        return ""
    least = 2 / 2**n
    return f"; sign-flip p {p:.2g}" + (
        f", the least {n} seeds can give" if p <= least * (1 + 1e-9) else ""
    )


def paired_text(settings: list[Setting]) -> str:
    """The paired table (a column per variant after the first) and its overall lines."""
    pairs = paired(settings)
    steps = sorted({k for d, _ in pairs.values() for k in d})
    if not steps:
        return "none yet: no seed has both runs evaluated at one step past the random steps"
    rows = [
        [f"{step:,}", *(d[step].text(signed=True) if step in d else "" for d, _ in pairs.values())]
        for step in steps
    ]
    lines = [_markdown(["env steps", *pairs], rows)]
    for label, (_, found) in pairs.items():
        if found is not None:
            summary, first, last, p = found
            lines.append(
                f"{label}, each seed's mean difference over the steps both its runs reached "
                f"after the random steps ({_span(first, last)}): {summary.text(signed=True)}"
                f"{_verdict(summary)}{_sign_flip_text(p, summary.n)}"
            )
    base = settings[0].label
    for label, counts in paired_counts(settings).items():
        span = _span(counts.steps[0], counts.steps[-1])
        lines.append(f"{label} − {base}, stand-still counts by seed over the same steps ({span}):")
        lines.append(counts_table((base, label), counts))
    return "\n\n".join(lines)


def _span(first: int, last: int) -> str:
    """``6,000–9,000``, or ``6,000`` where the steps are one."""
    return f"{first:,}" if first == last else f"{first:,}–{last:,}"
