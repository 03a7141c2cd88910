"""Benchmarks: the SAC update block, model fits and rollouts, buffers, env steps, the whole
loop, each fast path (amp, compile, CUDA graphs, acting device, pinned staging) on and off side
by side, compile warm-up times, and the scale-out rows (evaluation episode after episode vs as
one vector env; Hopper SAC env steps/s with env.num_envs 1, 2, 4, 8, sync and async; one run on
1 vs 2 processes).

Medians over repeats after a warm-up, on this machine; prints a table and writes JSON
(``--help`` lists the options). ``--reference`` times an older checkout's default SAC update
and model fits (e.g. a ``git worktree`` of an earlier commit) in the same rounds as this code's.
"""

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.bench.suite import main

if __name__ == "__main__":
    main(__doc__)
