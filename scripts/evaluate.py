"""Evaluate a finished (or running) training run.

    python scripts/evaluate.py RUN_DIR [--ckpt best|last|N] [--episodes 10] [--video [PATH]]

Loads the checkpoint's actor, runs deterministic episodes and prints the return mean and std;
``--video`` films one episode (GIF by default; MP4 needs imageio-ffmpeg) with headless
rendering (MUJOCO_GL=egl, or osmesa).
"""

from __future__ import annotations

import argparse
import os
import sys

from mbrl.runtime.progress import episodes
from mbrl.tools.eval_checkpoint import EvaluateError, evaluate, record_video


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--ckpt", default="best", help="best | last | N (iteration_N.pt)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument(
        "--video",
        nargs="?",
        const="",
        default=None,
        help="film one episode (default path: RUN_DIR/video_<ckpt>.gif)",
    )
    args = parser.parse_args()
    try:
        r = evaluate(args.run_dir, args.ckpt, args.episodes, args.seed)
        print(
            f"{args.run_dir} [{args.ckpt}, step {int(r['step'])}]: return "
            f"{r['eval/return_mean']:.1f} ± {r['eval/return_std']:.1f} over "
            f"{episodes(args.episodes)} (min {r['eval/return_min']:.1f}, "
            f"max {r['eval/return_max']:.1f})"
        )
        if args.video is not None:
            path = args.video or os.path.join(args.run_dir, f"video_{args.ckpt}.gif")
            n = record_video(args.run_dir, args.ckpt, path, args.seed)
            print(f"wrote {path} ({n} frames)")
    except EvaluateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
