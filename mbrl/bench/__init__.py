"""The benchmarks: ``scripts/bench.py`` (its table: ``suite.py``), ``scripts/loop_speed.py``
(``checkout_loops.py``) and ``scripts/gpu_check.py`` (``gpu_run.py``); docs/layout.md names
each module's part."""
