"""MBPO (Janner et al. 2019, Algorithm 2) around the SAC agent: model fits, the rewarder,
rollouts into the model pool, and SAC batches mixed from the real buffer and the pool."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from mbrl.agents import SAC
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.config import Config
from mbrl.envs.termination import TerminationFn
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.rewarder import Rewarder
from mbrl.rollout import rollout
from mbrl.timer import PhaseTimer

SAC_FIELDS = ("obs", "act", "rew", "next_obs", "terminated")


def rollout_length(env_steps: int, cfg: Config) -> int:
    """MBPO's schedule: min_length until min_epoch, linear to max_length at max_epoch."""
    r = cfg.rollout
    epoch = env_steps // cfg.mbpo.epoch_length
    if r.max_epoch == r.min_epoch:
        return r.max_length if epoch >= r.max_epoch else r.min_length
    frac = min(max((epoch - r.min_epoch) / (r.max_epoch - r.min_epoch), 0.0), 1.0)
    return int(r.min_length + frac * (r.max_length - r.min_length))


def pool_capacity(cfg: Config) -> int:
    """Room for retain_epochs epochs of rollouts at the schedule's longest length (MBPO)."""
    phases = math.ceil(cfg.mbpo.epoch_length / cfg.mbpo.model_train_freq)
    return cfg.rollout.retain_epochs * phases * cfg.rollout.batch_size * cfg.rollout.max_length


class MBPO:
    """The model-based half of the loop; the trainer calls :meth:`model_phase` and :meth:`batch`."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: Config,
        device: torch.device,
        termination_fn: TerminationFn,
        real: ReplayBuffer,
        agent: SAC,
        amp: str = "off",
        compile: bool = False,
    ) -> None:
        self.cfg, self.real, self.agent, self.termination_fn = cfg, real, agent, termination_fn
        self.model = DynamicsModel(obs_dim, act_dim, cfg.model).to(device)
        self.model_trainer = ModelTrainer(self.model, cfg.model, amp, compile)
        self.rewarder = (
            None
            if cfg.rewarder.mode == "none"
            else Rewarder(obs_dim, act_dim, cfg.rewarder, device)
        )
        fields = {**transition_fields(obs_dim, act_dim), "score": ((), torch.float32)}
        # Allocated once, for the longest rollouts of the schedule: nothing grows later.
        self.pool = ReplayBuffer(pool_capacity(cfg), fields, device)
        self.pool_ready = False  # set after the first rollout phase has written rows
        self.n_real = round(cfg.agent.batch_size * cfg.mbpo.real_ratio)

    def due(self, env_steps: int) -> bool:
        m = self.cfg.mbpo
        return env_steps >= m.init_steps and env_steps % m.model_train_freq == 0

    def model_phase(
        self, env_steps: int, gen: torch.Generator, timer: PhaseTimer
    ) -> dict[str, Any]:
        """Fit the model (and rewarder) on all real data, then refill the pool with rollouts."""
        with timer.phase("model"):
            data = self.real.rows()
            metrics = self.model_trainer.fit(
                data["obs"], data["act"], data["next_obs"], data["rew"], gen
            )
        if self.rewarder is not None:
            with timer.phase("rewarder"):
                metrics.update(self.rewarder.fit(self.model, data, gen))
        with timer.phase("rollout"):
            # Only the observations: gathering every field of 100k rows would be wasted copies.
            start = self.real.sample(self.cfg.rollout.batch_size, gen, ("obs",))["obs"]
            metrics.update(
                rollout(
                    self.model,
                    self.agent,
                    self.termination_fn,
                    start,
                    rollout_length(env_steps, self.cfg),
                    self.pool,
                    gen,
                    self.rewarder,
                    self.cfg.rewarder,
                )
            )
        metrics["rollout/pool_size"] = self.pool.size
        self.pool_ready = bool(self.pool.size > 0)  # sync-ok: once per model phase
        return metrics

    def batch(self, batch_size: int, gen: torch.Generator) -> dict[str, Tensor]:
        """A SAC batch: real_ratio of it from the real buffer, the rest from the model pool."""
        if not self.pool_ready or self.n_real >= batch_size:
            return self.real.sample(batch_size, gen, SAC_FIELDS)
        fake = self.pool.sample(batch_size - self.n_real, gen, SAC_FIELDS)
        if self.n_real == 0:
            return fake
        real = self.real.sample(self.n_real, gen, SAC_FIELDS)
        return {k: torch.cat([real[k], fake[k]]) for k in SAC_FIELDS}

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "model_trainer": self.model_trainer.state_dict(),
            "rewarder": None if self.rewarder is None else self.rewarder.state_dict(),
            "pool_ready": self.pool_ready,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.model_trainer.load_state_dict(state["model_trainer"])
        if self.rewarder is not None and state["rewarder"] is not None:
            self.rewarder.load_state_dict(state["rewarder"])
        self.pool_ready = state["pool_ready"]
