"""Did a run's time-left estimate hold? Replayed from the run's metrics (mbrl/tools/eta_replay.py):

    python scripts/eta_check.py runs/hopper/2026-11-29_04-02-07 [--at 5250] [--rows 8]

At the first log step where the run's estimate was ready (or ``--at``), it takes the time the
estimate then projects to each later log step the same process reached, and sets it against
the wall-clock time the run took to get there (what a user watching the bar would see). On a
GPU: `train.py ... max_minutes=8`, then this on its folder.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.config import Config
from mbrl.runtime.progress import duration
from mbrl.tools.eta_replay import clock_at, first_estimate, run_config, wall_check
from mbrl.tools.seed_args import OneLineParser


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run folder (config.yaml, metrics.jsonl)")
    parser.add_argument("--at", type=int, help="the log step to estimate from (default: first)")
    parser.add_argument("--rows", type=int, default=8, help="log steps shown, at most")
    args = parser.parse_args(argv)
    paths = [os.path.join(args.run, n) for n in ("config.yaml", "metrics.jsonl")]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        parser.error(f"{args.run}: no {os.path.basename(missing[0])} (a run folder has both)")
    try:  # (on the CPU: a replay needs no device, a GPU run's folder too)
        cfg = run_config(args.run)
    except ValueError as err:
        parser.error(f"{paths[0]}: {err}")
    with open(paths[1], encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    logged = sorted({int(r["step"]) for r in rows if "time/wall" in r})
    at = args.at if args.at is not None else first_estimate(cfg, rows)
    shown = ", ".join(f"{s:,}" for s in logged[:8]) + (", ..." if len(logged) > 8 else "")
    if at is None:
        parser.error(f"{args.run}: the estimate was never ready; its log steps: {shown}")
    if at not in logged:
        parser.error(f"--at {at:,} is not one of {args.run}'s log steps: {shown}")
    if not clock_at(cfg, rows, at)[0].ready(at):  # (the run's own bar showed none there)
        first = first_estimate(cfg, rows)
        then = f"its first: {first:,}" if first is not None else "it never was"
        parser.error(
            f"--at {at:,}: the run had no estimate yet there (it waits for every phase with "
            f"work left to be timed and a fit after the first); {then}"
        )
    print(report(cfg, rows, at, args.rows))
    return 0


def report(cfg: Config, rows: list[dict[str, Any]], at: int, shown: int) -> str:
    """The estimate at ``at``, then each shown log step: took, projected, the difference."""
    clock, grand = clock_at(cfg, rows, at)
    left = sum(clock.seconds_left(grand, at).values())
    points = wall_check(cfg, rows, at)
    lines = [f"estimate at step {at:,}: about {duration(left)} to step {cfg.total_steps:,}"]
    if not points:
        # (the replay goes on from `at` to the first resume: a later process's steps are left)
        return "\n".join([*lines, "(no later log step in the process that made it)"])
    every = -(-len(points) // max(shown, 1))  # (ceil: at most ``shown`` rows, and the last)
    picked = points[every - 1 :: every]
    if picked[-1] is not points[-1]:
        picked.append(points[-1])
    lines.append(f"{'step':>9} {'took':>14} {'projected':>14} {'diff':>6}")
    for p in picked:
        diff = p.projected / p.took - 1 if p.took > 0 else float("nan")
        took, projected = duration(p.took), duration(p.projected)
        lines.append(f"{p.step:>9,} {took:>14} {projected:>14} {diff:>+6.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
