"""The whole-loop benchmark behind ``scripts/bench.py``: a fixed short Hopper MBPO run, and
SAC updates of the agent it trained with denormal floats flushed and kept."""

from __future__ import annotations

import copy
import statistics
import time
from functools import partial
from typing import Any

import torch

from mbrl.agents import build_agent
from mbrl.bench.micro import ACT, OBS, Bench
from mbrl.config import Config
from mbrl.trainer import Trainer

# The whole-loop benchmark's fixed short Hopper MBPO run, as dotted config keys (also handed
# to other checkouts by scripts/loop_speed.py, so it stays plain data).
LOOP_SETTINGS: dict[str, Any] = {
    "env.name": "hopper",
    "algorithm.name": "mbpo",
    "total_steps": 1000,
    "algorithm.init_steps": 250,
    "mbpo.model_train_freq": 250,
    "algorithm.updates_per_step": 5,
    "model.max_epochs": 5,
    "rollout.batch_size": 20_000,
    "rollout.min_epoch": 0,
    "rollout.max_epoch": 0,
    "rollout.min_length": 1,
    "rollout.max_length": 1,
    "eval.every": 1000,
    "eval.episodes": 1,
    "logger.every": 250,
    "logger.progress": False,
    "logger.tensorboard": False,
    "checkpoint.snapshots": False,
}


def apply_settings(cfg: Any, settings: dict[str, Any]) -> None:
    """Set dotted keys (``"rollout.batch_size"``) on a config object."""
    for key, value in settings.items():
        *parents, leaf = key.split(".")
        node = cfg
        for name in parents:
            node = getattr(node, name)
        setattr(node, leaf, value)


def whole_loop(
    device: torch.device, run_dir: str, flush_denormal: bool = True
) -> tuple[dict[str, float], Trainer]:
    """Env steps/s of the real MBPO loop on a fixed short Hopper config (one run), and the
    trainer after it."""
    cfg = Config()
    apply_settings(cfg, {**LOOP_SETTINGS, "device": device.type, "flush_denormal": flush_denormal})
    t0 = time.perf_counter()
    trainer = Trainer(cfg, run_dir)
    trainer.run()
    wall = time.perf_counter() - t0
    result = {
        "env_steps_per_s": cfg.total_steps / wall,
        "wall_s": wall,
        **{f"{k}_s": v for k, v in trainer.timer.grand.items()},
    }
    return result, trainer


def trained_sac_update(b: Bench, trainer: Trainer, updates: int = 20) -> dict[str, float]:
    """SAC updates/s of an agent trained by ``whole_loop`` (run with denormals kept), on MBPO
    batches, from two copies of its state taken side by side: one with denormal floats flushed
    to zero, one with them kept. Leaves flushing on, as the bench runs."""
    cfg, algo = trainer.cfg, trainer.algo
    agent, gen = algo.agent, torch.Generator(device=b.device).manual_seed(0)
    batches = [algo.model_side.batch(cfg.agent.batch_size, gen) for _ in range(updates)]
    copies = {}
    for flush in (True, False):
        copies[flush] = build_agent(OBS, ACT, cfg.agent, device=b.device, amp=trainer.speed.sac_amp)
        copies[flush].load_state_dict(copy.deepcopy(agent.state_dict()))

    def run(flush: bool) -> None:
        torch.set_flush_denormal(flush)
        for batch in batches:
            copies[flush].update(batch, gen)
        torch.set_flush_denormal(True)

    t = b.side_by_side({"flush": partial(run, True), "keep": partial(run, False)})
    return {k: updates / statistics.median(v) for k, v in t.items()}
