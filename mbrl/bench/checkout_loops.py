"""``scripts/loop_speed.py``: the whole loop (``loop_bench.LOOP_SETTINGS``) run alternately
on two checkouts, each run a fresh process that imports the checkout's own ``mbrl``."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from mbrl.bench.loop_bench import LOOP_SETTINGS
from mbrl.bench.update_bench import child_json

CHILD = """
import json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import mbrl
from mbrl.config import Config
from mbrl.trainer import Trainer
if not os.path.abspath(mbrl.__file__).startswith(sys.argv[1] + os.sep):
    sys.exit(f"imported mbrl from {mbrl.__file__}, not from {sys.argv[1]}")
# Keys renamed since: older checkouts take the same setting under their own name.
LEGACY = {"algorithm.init_steps": "mbpo.init_steps",
          "algorithm.updates_per_step": "mbpo.updates_per_step"}
cfg = Config()
for key, value in json.loads(sys.argv[2]).items():
    for dotted in (key, LEGACY.get(key)):
        *parents, leaf = (dotted or "?").split(".")
        node = cfg
        for name in parents:
            node = getattr(node, name, None)
        if dotted and node is not None and hasattr(node, leaf):
            setattr(node, leaf, value)
            break
    else:
        sys.exit(f"this checkout's Config has no key {key!r}")
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    trainer = Trainer(cfg, os.path.join(tmp, "run"))
    trainer.run()
    wall = time.perf_counter() - t0
    warmup = sum(c.seconds or 0.0 for c in getattr(trainer, "compiled", {}).values())
    print(json.dumps({"env_steps_per_s": cfg.total_steps / (wall - warmup), "warmup_s": warmup}))
"""


def run(checkout: str, device: str, extra: dict[str, str] | None = None) -> float:
    settings = json.dumps({**LOOP_SETTINGS, "device": device, **(extra or {})})
    # (cwd: never import this folder's mbrl by accident)
    out = child_json(CHILD, os.path.abspath(checkout), settings, cwd=tempfile.gettempdir())
    return float(out["env_steps_per_s"])


def main(description: str) -> None:
    """``scripts/loop_speed.py``'s command line (``description``: its usage text)."""
    p = argparse.ArgumentParser(description=description.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--new-set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    if bad := [kv for kv in args.new_set if "=" not in kv]:
        p.error(f"--new-set takes KEY=VALUE, not {bad[0]!r}")
    extra = dict(kv.split("=", 1) for kv in args.new_set)
    for path in (args.old, args.new):
        if not os.path.isfile(os.path.join(path, "mbrl", "trainer.py")):
            p.error(f"{path!r} is not a FlowMBPO checkout (no mbrl/trainer.py)")
    ratios = []
    for i in range(args.rounds):
        t0 = time.perf_counter()
        old, new = run(args.old, args.device), run(args.new, args.device, extra)
        ratios.append(new / old)
        print(
            f"round {i + 1}: old {old:.1f}, new {new:.1f} env steps/s, ratio {new / old:.2f}"
            f" ({time.perf_counter() - t0:.0f} s)"
        )
    print(f"median ratio new/old: {statistics.median(ratios):.2f}")
