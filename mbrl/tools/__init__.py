"""Tools for the user beside the algorithm: profiling mode, plots, the seeds runner's runs and
report, evaluating and probing saved runs, the config reference (benchmarks: ``mbrl/bench/``)."""
