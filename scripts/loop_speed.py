"""Whole-loop speed of two checkouts side by side: the benchmark's fixed short Hopper MBPO
config, run alternately on the code in each folder (e.g. a `git worktree` of an older commit).

    python scripts/loop_speed.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 2] [--device cpu]
                                 [--new-set compile=true ...]

Only ``Config`` and ``Trainer`` are used (the settings travel as dotted keys, with the older
names of renamed keys as a fallback); a checkout whose Config lacks a key is refused.
``--new-set KEY=VALUE`` sets a key for NEW only (e.g. ``compile=true``: the setting a long run
gets). Each run is a fresh process; prints env steps/s per run, with the time a run spent
compiling (its warm-up, which a long run repays) left out, and the median ratio NEW / OLD.
"""

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.bench.checkout_loops import main

if __name__ == "__main__":
    main(__doc__)
