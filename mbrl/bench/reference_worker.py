"""An older checkout (a ``git worktree`` of it) timed in a worker process beside this one:
``scripts/bench.py --reference PATH``; and ``child_json``, the answer of a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import torch

# An older checkout's default SAC update and model-fit epoch, timed in a worker process; it
# uses only what every version has: SAC(obs, act, cfg, device), ReplayBuffer, ModelTrainer.
WORKER = r"""
import os, sys, time
checkout, device = sys.argv[1], sys.argv[2]
sys.path.insert(0, checkout)
import torch
torch.set_num_threads(1)
torch.set_flush_denormal(True)
import mbrl
if not os.path.abspath(mbrl.__file__).startswith(checkout + os.sep):
    sys.exit(f"imported mbrl from {mbrl.__file__}, not from {checkout}")
from mbrl.agents.sac import SAC, SACConfig
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.models import DynamicsModel, ModelTrainer
try:
    from mbrl.models import model_config
except ImportError:  # (a checkout from before models were plug-ins)
    from mbrl.config import ModelConfig as model_config  # (called with name=...)
OBS, ACT, FIELDS = 11, 3, ("obs", "act", "rew", "next_obs", "terminated")
dev = torch.device(device)
g = torch.Generator().manual_seed(5)
rows = {"obs": torch.randn(5000, OBS, generator=g)}
rows["act"] = torch.rand(5000, ACT, generator=g) * 2 - 1
rows["rew"] = torch.randn(5000, generator=g)
rows["next_obs"] = torch.randn(5000, OBS, generator=g)
rows["terminated"] = torch.rand(5000, generator=g) < 0.05
rows["truncated"] = torch.zeros(5000, dtype=torch.bool)
buf = ReplayBuffer(10000, transition_fields(OBS, ACT), dev)
buf.add({k: v.to(dev) for k, v in rows.items()})
torch.manual_seed(0)
agent = SAC(OBS, ACT, SACConfig(), dev)
gen = torch.Generator(device=dev).manual_seed(0)
fits = {}

def fit_epoch(name, n):
    if name not in fits:
        cfg = model_config(name=name)
        model = DynamicsModel(OBS, ACT, cfg).to(dev)
        trainer = ModelTrainer(model, cfg)
        d = {k: v[:n].to(dev) for k, v in rows.items()}
        target = model.targets(d["obs"], d["next_obs"], d["rew"])
        inputs = torch.cat([d["obs"], d["act"]], -1)
        model.fit_normalizers(inputs, target)
        boot = torch.randint(0, n, (cfg.members, n), generator=g).to(dev)
        fits[name] = (trainer, model.in_norm(inputs), model.out_norm(target), boot)
    trainer, x, y, boot = fits[name]
    trainer._epoch(x, y, boot, gen)

for line in sys.stdin:
    cmd, *args = line.split()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if cmd == "sac":
        for _ in range(int(args[0])):
            agent.update(buf.sample(256, gen, FIELDS), gen)
    else:
        fit_epoch(args[0], int(args[1]))
    if device == "cuda":
        torch.cuda.synchronize()
    print(time.perf_counter() - t0, flush=True)
"""


def child_json(script: str, *args: str, **run: Any) -> dict[str, Any]:
    """Run ``python -c script *args`` in a fresh process (``run``: more of subprocess.run's
    arguments) and return the JSON object its last line of output holds."""
    cmd = [sys.executable, "-c", script, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, **run)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


class ReferenceWorker:
    """An older checkout (a ``git worktree`` of it) in a worker process that times its
    default SAC update and model-fit epoch on request (:meth:`seconds`)."""

    def __init__(self, checkout: str, device: torch.device) -> None:
        path = os.path.abspath(checkout)
        if not os.path.isfile(os.path.join(path, "mbrl", "trainer.py")):
            raise ValueError(f"{checkout!r} is not a FlowMBPO checkout (no mbrl/trainer.py)")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, path, device.type],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),  # never import this folder's mbrl by accident
        )

    def seconds(self, *request: object) -> float:
        """Seconds for a request: ``"sac", updates``, that many of its SAC updates (batches
        from its buffer); ``"fit", model, rows``, one model-fit epoch over ``rows`` rows per
        member."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, request)) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the reference worker stopped (exit code {self.proc.wait()})")
        return float(answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
