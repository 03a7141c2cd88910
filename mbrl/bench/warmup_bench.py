"""How long compiling takes (``scripts/bench.py``'s warm-up rows): the SAC update and the
model-fit step of each model, compiled in a fresh process twice over one new inductor cache
folder: first cold (nothing cached), then warm (inductor's compiled kernels on disk)."""

from __future__ import annotations

import os
import tempfile

from mbrl.bench.reference_worker import child_json

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from mbrl.agents import SAC, SACConfig
from mbrl.models import model_config
from mbrl.models import DynamicsModel, ModelTrainer
dev = torch.device(sys.argv[1])
out = {}
t0 = time.perf_counter()
SAC(11, 3, SACConfig(), dev, compile=True).warm_up()
out["sac"] = time.perf_counter() - t0
for name in ("flow", "gaussian"):
    cfg = model_config(name)
    trainer = ModelTrainer(DynamicsModel(11, 3, cfg).to(dev), cfg, compile=True)
    t0 = time.perf_counter()
    trainer.warm_up()
    out[name] = time.perf_counter() - t0
print(json.dumps(out))
"""


def compile_warmups(device: str) -> dict[str, dict[str, float]]:
    """Seconds to compile the SAC update and each model's fit step: ``{"cold": ..., "warm":
    ...}``, each ``{"sac": s, "flow": s, "gaussian": s}`` (Hopper sizes, default settings)."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        for when in ("cold", "warm"):
            out[when] = child_json(CHILD, device, env=env)
    return out
