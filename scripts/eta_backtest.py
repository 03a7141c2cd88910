"""How well the time-left estimate foresaw recorded runs' model fits (mbrl/tools/fit_backtest.py):

    python scripts/eta_backtest.py docs/ab/long_v4_cpu/metrics.tar.gz \\
        docs/ab/walker_v4_cpu/metrics.tar.gz --points n8,10k,20k,30k

For each seeds bundle and variant, and each point: the runs counted there, and the median and
range of (row-epochs the rule foresaw for the later fits) / (what they took) - 1; a run found in
an earlier bundle too is counted there only. docs/usage.md quotes its tables.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.tools.fit_backtest import Fit, Recorded, bundle_runs, parse_point, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundles", nargs="+", help="seeds bundles (metrics.tar.gz)")
    parser.add_argument(
        "--points", default="n3,n8,10k", help="n<fits after the first> or <thousands>k, by commas"
    )
    args = parser.parse_args(argv)
    points = [p.strip() for p in args.points.split(",") if p.strip()]
    for point in points:
        try:
            parse_point(point)
        except ValueError as err:
            parser.error(str(err))
    groups: dict[str, list[Recorded]] = defaultdict(list)
    seen: dict[tuple[Fit, ...], str] = {}  # (bundles share runs: each is counted once)
    for path in args.bundles:
        if not os.path.isfile(path):
            parser.error(f"{path}: no such bundle (a seeds report's metrics.tar.gz)")
        where = os.path.dirname(os.path.normpath(path)).removeprefix("docs/")
        for run in bundle_runs(path):
            here, fits = f"{where} {run.name}", tuple(run.fits)
            if fits in seen:
                print(f"(left out: {here}, the same run as {seen[fits]})")
                continue
            seen[fits] = here
            groups[f"{where} {run.name.split('/')[0]}"].append(run)
    print(table(dict(groups), points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
