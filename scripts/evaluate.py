"""Evaluate a finished (or running) training run.

    python scripts/evaluate.py RUN_DIR [--ckpt best|last|N] [--episodes 10] [--seed 123]
                               [--as-training] [--sample] [--video [PATH]]

Loads the checkpoint's actor, runs deterministic episodes (episode i from env seed
``--seed`` + i: episodes training never evaluated on) and prints the return mean and std;
``--as-training`` runs training's own evaluation episodes instead (``eval.episodes`` of them,
from seed ``seed`` + 10 000), so the return is the one the run logged at that step.
``--sample`` draws the actions from the policy as training does (seeded by the env seed).
``--video`` films one episode (GIF by default; MP4 needs imageio-ffmpeg) with headless
rendering (MUJOCO_GL=egl, or osmesa).
"""

from __future__ import annotations

import argparse
import os
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.runtime.progress import episodes
from mbrl.tools.eval_checkpoint import (
    EvaluateError,
    check_video_path,
    evaluate,
    logged_return,
    record_video,
)

SEED, EPISODES = 123, 10  # the default episodes: env seeds 123..132


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--ckpt", default="best", help="best | last | N (iteration_N.pt)")
    parser.add_argument("--episodes", type=int, help=f"default {EPISODES}")
    parser.add_argument("--seed", type=int, help=f"episode i: seed + i ({SEED})")
    parser.add_argument(
        "--as-training",
        action="store_true",
        help="training's evaluation episodes (its eval.episodes, from its seed + 10 000)",
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="actions drawn from the policy, as in training (default: its mean action)",
    )
    parser.add_argument(
        "--video",
        nargs="?",
        const="",
        help="film one episode (default path: RUN_DIR/video_<ckpt>.gif)",
    )
    args = parser.parse_args()
    if args.as_training and (args.seed is not None or args.episodes is not None):
        parser.error("--as-training runs training's episodes: leave out --seed and --episodes")
    if args.seed is not None and args.seed < 0:  # (gymnasium's own error is a traceback)
        print(f"error: --seed {args.seed}: env seeds are 0 or more (e.g. {SEED})", file=sys.stderr)
        return 2
    if not args.as_training:
        args.seed = SEED if args.seed is None else args.seed
        args.episodes = EPISODES if args.episodes is None else args.episodes
    try:
        if args.video:  # (a path that cannot be written is said before the episodes run)
            check_video_path(args.video)
        r = evaluate(args.run_dir, args.ckpt, args.episodes, args.seed, args.sample)
        n, seed = int(r["episodes"]), int(r["seed"])
        which = "training's evaluation episodes" if args.as_training else "--seed"
        print(
            f"{args.run_dir} [{args.ckpt}, step {int(r['step'])}]: return "
            f"{r['eval/return_mean']:.1f} ± {r['eval/return_std']:.1f} over {episodes(n)}"
            f"{' with sampled actions' if args.sample else ''} "
            f"(env seeds {seed}..{seed + n - 1}: {which}; min {r['eval/return_min']:.1f}, "
            f"max {r['eval/return_max']:.1f}; mean length {r['eval/episode_length_mean']:.0f})"
        )
        # (the logged return is the deterministic policy's: no comparison for --sample)
        logged = None
        if args.as_training and not args.sample:
            logged = logged_return(args.run_dir, int(r["step"]))
        if logged is not None:
            ours, verdict = r["eval/return_mean"], "the same"
            if logged != ours:  # (to the last bit: both printed whole)
                why = "another machine, torch or MuJoCo version?"
                verdict = f"this differs ({ours!r} against {logged!r}: {why})"
            print(f"  the run logged {logged:.1f} at step {int(r['step'])}: {verdict}")
        if args.video is not None:
            path = args.video or os.path.join(args.run_dir, f"video_{args.ckpt}.gif")
            frames = record_video(args.run_dir, args.ckpt, path, seed)
            print(f"wrote {path} ({frames} frames, the episode from env seed {seed})")
    except EvaluateError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
