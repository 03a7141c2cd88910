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
  profile   100 s  a Hopper profiling window (profile=true: the first model fit and the next,
                   to their early stops, and the SAC updates between them) with
                   TEARDOWN_CUPTI=0 (CUDA graphs under CUPTI have crashed)
  tests    the rest, at least 150 s: the CUDA tests (pytest -m cuda), verbose, at most 90 s
                   per test, the first test of each mechanism before the others

What DIR gets (at most 8 files, each written as soon as it has something to say; read
summary.txt first), why each limit is what it is, and the second command for the rest of the
GPU time (a real Hopper run under max_minutes): docs/benchmarks.md, "On a GPU, run this first".
"""

# The check must run (and report) where the package is not installed: its measuring steps
# run as ``python -m`` from the checkout's root, and _checkout finds the runner there too.
import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.bench.gpu_run import main

if __name__ == "__main__":
    main(__doc__)
