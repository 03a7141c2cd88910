"""Tools beside the algorithm: benchmarks, profiling, plots, and evaluating saved runs."""
