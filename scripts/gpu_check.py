"""The first command for a GPU machine: a verdict on what runs and how fast, in one command
that ends inside 9 minutes on one H100, cold compiles included.

    python3 scripts/gpu_check.py --out DIR                       # on the GPU machine
    python3 scripts/gpu_check.py --device cpu --quick --out DIR  # the check itself, on a CPU
                                                 # (each limit and the budget x4 there)

Steps, verdicts first; each runs in a process of its own, in a session of its own (past its
limit the whole process group is killed, inductor's compile workers with it), with
FLOWMBPO_STRICT=1 (a compile or CUDA-graph fallback fails the step instead of timing eager
code under a fast path's name) and one inductor cache for all steps (the profile window finds
the kernels the sac and model steps compiled):

  step      limit  what
  versions   30 s  Python, torch, CUDA, cuDNN, triton, numpy, ...; the device; the commit
  sac       120 s  the G-update SAC block (G = 20, batch 256): eager, then compiled + graphed
                   (updates/s, compile warm-up, graph captured yes/no), then both at amp=bf16
  model     140 s  one fit epoch per model (flow, gaussian, deterministic) compiled + graphed
                   at amp=auto (rows/s), one 100 000-row rollout step per model
                   (transitions/s), then each fit eager
  profile   100 s  a Hopper profiling window (profile=true: 300 SAC updates, a model fit capped
                   at 2 epochs) with TEARDOWN_CUPTI=0 (CUDA graphs under CUPTI have crashed)
  tests    the rest, at least 150 s: the CUDA tests (pytest -m cuda), verbose, at most 90 s
                   per test, the first test of each mechanism before the others

Why each limit is what it is: mbrl/bench/gpu_run.py.

DIR gets at most 8 files, none over 16 MiB, none in a folder (what a GPU lease gives back),
each written as soon as it has something to say:

  summary.txt   read this first: each step's outcome and every figure (rewritten before and
                after every step: a killed check names the step it was in)
  summary.json  the same, as JSON
  steps.log     each step's command and output (the tests one by one, -v)
  versions.json, sac.json, model.json   each measuring step's figures, rewritten as soon as
                each variant is measured (a step killed at its limit keeps what it measured)

The second command, for the rest of the GPU time: a real Hopper run at MBPO's settings that
stops cleanly after max_minutes (the minutes the lease has left, less about 1.5 for start-up
and the last checkpoint; ckpt/last.pt is written, as after Ctrl-C) and ends with each phase's
seconds per 1000 env steps and what ran; the run folder stays outside DIR (its checkpoints
are GBs):

  python3 scripts/train.py env=hopper env.version=v4 max_minutes=4 logger.progress=false \\
      hydra.run.dir=/tmp/hopper > DIR/hopper.txt 2>&1; cp /tmp/hopper/metrics.jsonl DIR/
"""

import os
import sys

# The check must run (and report) where the package is not installed: its measuring steps
# run as ``python -m`` from the checkout's root, and so is the runner found.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mbrl.bench.gpu_run import main

if __name__ == "__main__":
    main(__doc__)
