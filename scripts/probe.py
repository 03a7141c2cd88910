"""Probe a run's model and critics on its policy's own episodes.

    python scripts/probe.py RUN_DIR [--ckpt best|last|N] [--episodes 3] [--seed S] [--draws 20]

The checkpoint's policy acts in the real env as in training (actions drawn from it; episode i
from env seed ``--seed`` + i, by default training's evaluation seeds, ``seed`` + 10 000). On
those transitions it prints the model's one-step errors (reward, next state, termination as
rollouts decide it) beside the model's own spread and the env's step size, and the critics'
Q(s, a) beside the discounted soft return that followed. Is the model wrong where the policy
goes? Do the critics overrate what the policy earns?
"""

from __future__ import annotations

import argparse
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)
import torch

from mbrl.evaluator import EVAL_SEED
from mbrl.tools.eval_checkpoint import EvaluateError, load_run
from mbrl.tools.probing import probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--ckpt", default="last", help="best | last | N (iteration_N.pt)")
    parser.add_argument("--episodes", type=int, default=3, help="default 3")
    parser.add_argument("--seed", type=int, help="default: the run's seed + 10000")
    parser.add_argument("--draws", type=int, default=20, help="model samples per row (20)")
    args = parser.parse_args()
    if args.episodes < 1 or args.draws < 2:
        parser.error(f"--episodes {args.episodes} / --draws {args.draws}: need >= 1 and >= 2")
    torch.set_num_threads(1)
    try:
        cfg, state = load_run(args.run_dir, args.ckpt)
    except EvaluateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    seed = cfg.seed + EVAL_SEED if args.seed is None else args.seed
    print(f"{args.run_dir} [{args.ckpt}, step {int(state['step'])}]:")
    print(probe(cfg, state, args.episodes, seed, args.draws))
    return 0


if __name__ == "__main__":
    sys.exit(main())
