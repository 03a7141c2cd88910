"""A published curve for ``--reference`` (step,mean,std) from one of erl_lib's five-curve files.

    python scripts/reference_csv.py SRC OUT --title "MBPO on Hopper (Janner et al. 2019)" \\
        --source "the 4kubo/erl_lib repository, results/main/gym/mbpo/Hopper.csv"

SRC holds the columns step,time,reward,seed with five evenly spaced series per step (mean -2..+2
std; mbrl/tools/published.py); OUT gets every step but step 0, with a header that says where
the curve comes from, how it was read and how its steps count. docs/reference/ was written so.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.tools.published import five_curves, write_reference

HEADER = """{title}: evaluation return, mean and standard deviation over
seeds, from {source}.
That file holds five curves that are evenly spaced at every step (checked at each one): mean -
2 std, mean - std, mean, mean + std and mean + 2 std; mean is its third curve, std the gap
between the third and the fourth. Its point at step 0 (the untrained policy) is left out.
Steps are env steps, MBPO's 5000 initial random steps included: the first point here, {first},
is the first evaluation after them and one 1000-step epoch. (MBPO's own logger counts
otherwise: softlearning's timesteps_total is epoch x 1000 + timestep, from the first epoch after
the initial exploration, so a curve read from MBPO's own diagnostics would put that evaluation
at 1000.) FlowMBPO's steps count the random steps too, so the two align as they are.
Written by: python scripts/reference_csv.py {args}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", help="erl_lib's CSV (columns step,time,reward,seed)")
    parser.add_argument("out", help="the reference CSV to write (step,mean,std)")
    parser.add_argument("--title", required=True, help='e.g. "MBPO on Walker2d (Janner et al.)"')
    parser.add_argument("--source", required=True, help="where SRC comes from, for the header")
    args = parser.parse_args(argv)
    if os.path.exists(args.out) and os.path.samefile(args.src, args.out):
        parser.error(f"OUT {args.out} is SRC: it would be overwritten by what is read from it")
    try:
        ref = five_curves(args.src)
    except (OSError, ValueError) as err:
        print(f"reference_csv.py: {err}", file=sys.stderr)
        return 2
    given = argv if argv is not None else sys.argv[1:]
    header = HEADER.format(
        title=args.title,
        source=args.source,
        first=f"{ref.steps[0]:.0f}",
        args=shlex.join(os.path.basename(a) if a == args.src else a for a in given),
    )
    write_reference(ref, args.out, header)
    print(f"{args.out}: {len(ref.steps)} steps, {ref.steps[0]:.0f} to {ref.steps[-1]:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
