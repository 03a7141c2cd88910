"""Learning curves, a summary table and time-per-phase bars for runs and sweeps.

    python scripts/plot.py RUN_OR_SWEEP_DIR... [--out fig.png] [--metric eval/return_mean]
                           [--reference docs/reference/mbpo_hopper.csv] [--smooth] [--interval]

Runs are grouped by what differs between them (the command-line overrides, e.g.
``model=flow``); seeds are pooled into a mean curve with a ±std band (sample std), or with
--interval the 95 % bootstrap interval of the mean; --smooth smooths each seed first. Writes
OUT (.png and .svg) and OUT_phases (.png and .svg), and prints per setting the return at the
last step every run reached (mean ± std across seeds) and the AUC up to it (the curve's mean
height).
"""

from __future__ import annotations

import argparse
import os
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.tools.figures import check_figure_path, plot_curves, plot_phases
from mbrl.tools.plotting import (
    Setting,
    check_runs,
    find_runs,
    group,
    repeated_seeds,
    summary_table,
)
from mbrl.tools.published import reference_for
from mbrl.tools.seed_report import CAMPAIGN, campaign_order, still_running, tables


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument(
        "--out",
        help="figure path (default: <first path>/curves.png; in a seeds.py campaign's folder, "
        "whose report owns that name, <first path>/plot_curves.png)",
    )
    parser.add_argument(
        "--metric",
        default="eval/return_mean",
        help="the metrics.jsonl key to plot and tabulate (default: eval/return_mean; e.g. "
        "model/holdout_nll, learner/alpha: docs/usage.md lists them)",
    )
    parser.add_argument(
        "--by",
        help="group by these config keys only, comma-separated (default: the overrides "
        "that differ between the runs, seed aside)",
    )
    parser.add_argument(
        "--reference",
        help="a published curve to draw beside the runs: CSV with columns step,mean,std",
    )
    parser.add_argument(
        "--baseline",
        help="the setting the paired differences are taken against (its label, e.g. "
        "model=gaussian; default: a seeds.py campaign's first variant, else the first label)",
    )
    parser.add_argument(
        "--smooth",
        action="store_true",
        help="each seed's curve smoothed first, as the seeds reports' smoothed columns (the mean "
        "of its last 5 evaluations past its random steps), to set beside a smoothed curve",
    )
    parser.add_argument(
        "--interval",
        action="store_true",
        help="the band is the 95 %% bootstrap interval of the mean over seeds (where 4 or more "
        "reached the step), not ±std",
    )
    parser.add_argument(
        "--per-step",
        action="store_true",
        help="also print the markdown tables of scripts/seeds.py's report: per setting and "
        "evaluated step, the return's mean ± std, bootstrap interval and n over seeds, "
        "stand-still counts, the smoothed return beside --reference, and paired differences "
        "between settings by seed",
    )
    args = parser.parse_args()
    by = args.by.split(",") if args.by else None
    try:
        runs = find_runs(args.paths)
        envs = check_runs(runs, by, args.metric)
        reference = reference_for(args.reference, envs)
        if args.out is not None:
            check_figure_path(args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    settings = campaign_order(group(runs, by), args.paths[0])
    if args.baseline is not None and (refused := baseline_first(settings, args.baseline)):
        print(f"error: {refused}", file=sys.stderr)
        return 2
    print(f"{len(runs)} runs, {len(settings)} settings")
    print(still_running([r.path for r in runs]), file=sys.stderr, end="")
    for line in repeated_seeds(settings):
        print(line, file=sys.stderr)
    print(summary_table(settings, args.metric, args.smooth))
    if args.per_step:
        print(tables(settings, reference))
    campaign = os.path.isfile(os.path.join(args.paths[0], CAMPAIGN))  # (its report: curves.png)
    out = args.out or os.path.join(args.paths[0], ("plot_" if campaign else "") + "curves.png")
    written = plot_curves(settings, out, args.metric, reference, args.smooth, args.interval)
    base, ext = os.path.splitext(out)
    written += plot_phases(settings, f"{base}_phases{ext or '.png'}")
    print("wrote " + ", ".join(written))
    return 0


def baseline_first(settings: list[Setting], baseline: str) -> str:
    """Put the setting named ``baseline`` first (each other one is paired against it), or
    say why not."""
    labels = [s.label for s in settings]
    if baseline not in labels:
        return f"--baseline {baseline!r} is none of the settings: {', '.join(labels)}"
    settings.sort(key=lambda s: s.label != baseline)
    return ""


if __name__ == "__main__":
    sys.exit(main())
