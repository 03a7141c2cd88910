"""The benchmark functions run and report sane numbers (speed itself is never asserted)."""

from __future__ import annotations

import torch

from mbrl import bench


def test_bench_functions_report_positive_rates() -> None:
    b = bench.Bench(torch.device("cpu"), repeats=1, warmup=0)
    sac = bench.sac_update(b, "off", batch_size=32, updates=2)
    # One update: critic fwd (online + target) + bwd, actor fwd + bwd through the critic.
    # 256x256 hidden layers at batch 32 put it well above 30 MFLOP and below 300 MFLOP.
    assert 3e7 < sac["flops_per_update"] < 3e8 and sac["updates_per_s"] > 0
    assert bench.model_fit(b, "gaussian", "off", rows=300) > 0
    assert bench.model_rollout(b, "flow", batch=500) > 0
    assert all(v > 0 for v in bench.buffer_rates(b).values())
    assert bench.env_steps(b, steps=50) > 0
    assert bench.gemm_flops(b, 64) > 0
