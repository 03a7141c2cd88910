"""The benchmarks, one tool: ``python scripts/bench.py`` (the table: ``suite.py``; its rows:
``micro.py``, ``update_bench.py``, ``seed_bench.py``, ``warmup_bench.py``, ``loop_bench.py``,
``scale_bench.py``, ``scale_runs.py``; an older checkout timed beside this one:
``reference_worker.py``), the whole loop of two checkouts side by side (``python
scripts/loop_speed.py``), and the first command on a GPU machine, ``python
scripts/gpu_check.py`` (``gpu_run.py``, ``gpu_steps.py``, ``gpu_summary.py``)."""
