"""Fit the flow and the Gaussian ensemble on the same real data and compare holdout NLL.

    python scripts/compare_models.py runs/hopper/2026-11-21_10-00-00 [--max-epochs 200] [--rows N]

The data are the real transitions in the run's ``ckpt/last.pt``. The run's own model keeps its
config; the other gets its own defaults (the Gaussian: MBPO's, early stopping on holdout MSE;
the flow: holdout NLL) with the run's fit settings (:data:`FIT_KEYS`). Both get the same holdout
split (same seed, same rows) and the same epoch cap. The
holdout NLL is in nats per transition of the raw targets [s' - s, r] and the MSE is of the
point prediction in raw units (both mean over elites), so the two models compare directly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)
import torch

from mbrl.config import ModelConfig
from mbrl.models import DynamicsModel, ModelTrainer, model_config
from mbrl.runtime.utils import configure_cpu
from mbrl.tools.eval_checkpoint import load_run

# The fit's own settings, which the compared model takes from the run: ensemble, split,
# minibatch and stopping (its architecture, optimiser and holdout score stay its own)
FIT_KEYS = (
    "members", "elites", "batch_size", "holdout_ratio", "max_holdout", "patience",
    "improvement", "max_epochs", "max_seconds",
)  # fmt: skip


def model_configs(run: ModelConfig, max_epochs: int | None) -> dict[str, ModelConfig]:
    """The flow's and the Gaussian's configs: the run's own model as it ran, the other with
    its defaults and the run's :data:`FIT_KEYS`; ``max_epochs`` (None: the run's) for both."""
    cap: dict[str, Any] = {} if max_epochs is None else {"max_epochs": max_epochs}
    fit = {k: getattr(run, k) for k in FIT_KEYS} | cap
    own = dataclasses.replace(run, **cap)
    return {n: own if n == run.name else model_config(n, **fit) for n in ("flow", "gaussian")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--max-epochs", type=int, help="cap per fit (default: the run's)")
    parser.add_argument("--rows", type=int, help="use only the first N real transitions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    cfg, state = load_run(args.run_dir, "last")
    configure_cpu(cfg.threads, cfg.flush_denormal)
    data = state["buffers"]["real"]["data"]  # oldest first
    if args.rows is not None:
        data = {k: v[: args.rows] for k, v in data.items()}
    obs_dim, act_dim = data["obs"].shape[1], data["act"].shape[1]
    print(f"{cfg.env.name}: {data['obs'].shape[0]} real transitions from {args.run_dir}")
    results = {}
    for name, mcfg in model_configs(cfg.model, args.max_epochs).items():
        torch.manual_seed(args.seed)
        model = DynamicsModel(obs_dim, act_dim, mcfg)
        t0 = time.perf_counter()
        out = ModelTrainer(model, mcfg).fit(
            data["obs"],
            data["act"],
            data["next_obs"],
            data["rew"],
            torch.Generator().manual_seed(args.seed),
        )
        assert out is not None  # (None only for a fit paused by its ``stop``: none given here)
        results[name] = {k: float(v) for k, v in out.items()} | {
            "seconds": time.perf_counter() - t0
        }
    print(f"{'model':<10}{'holdout NLL':>14}{'holdout MSE':>14}{'epochs':>8}{'seconds':>10}")
    for name, r in results.items():
        print(
            f"{name:<10}{r['model/holdout_nll']:>14.3f}{r['model/holdout_mse']:>14.5f}"
            f"{int(r['model/epochs']):>8}{r['seconds']:>10.1f}"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
