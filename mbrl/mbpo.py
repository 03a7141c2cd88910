"""MBPO (Janner et al. 2019, Algorithm 2) around the SAC agent: model fits, the rewarder,
rollouts into the model pool, and SAC batches mixed from the real buffer and the pool."""

from __future__ import annotations

import logging
from collections.abc import Callable
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
from mbrl.runtime.timer import PhaseTimer

SAC_FIELDS = ("obs", "act", "rew", "next_obs", "terminated")


def _quiet(text: str) -> None:
    """A status sink that shows nothing."""


def mbpo_epoch(env_steps: int, cfg: Config) -> int:
    """MBPO's epoch counter: epochs of ``epoch_length`` env steps *after* the initial random
    exploration (mbpo.py's ``_epoch`` starts at 0 once ``init_steps`` are collected)."""
    return max(env_steps - cfg.mbpo.init_steps, 0) // cfg.mbpo.epoch_length


def rollout_length(env_steps: int, cfg: Config) -> int:
    """MBPO's ``_set_rollout_length``: min_length up to min_epoch, then linear to max_length
    at max_epoch, then constant. (A schedule with min_epoch == max_epoch jumps there.)"""
    r, epoch = cfg.rollout, mbpo_epoch(env_steps, cfg)
    if epoch <= r.min_epoch:
        return r.min_length
    dx = 1.0 if r.max_epoch == r.min_epoch else (epoch - r.min_epoch) / (r.max_epoch - r.min_epoch)
    return int(min(dx, 1.0) * (r.max_length - r.min_length) + r.min_length)


def model_pool_size(cfg: Config, length: int) -> int:
    """MBPO's ``_reallocate_model_pool``: retain_epochs epochs of rollouts of ``length``."""
    m = cfg.mbpo
    rollouts_per_epoch = cfg.rollout.batch_size * m.epoch_length / m.model_train_freq
    return cfg.rollout.retain_epochs * int(length * rollouts_per_epoch)


def pool_capacity(cfg: Config) -> int:
    """The pool is allocated once, at the size for the schedule's longest rollouts; SAC
    samples only from the window ``model_pool_size(cfg, current length)`` of newest rows."""
    return model_pool_size(cfg, max(cfg.rollout.min_length, cfg.rollout.max_length))


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
        # MBPO's _training_batch: int(batch_size * real_ratio) real rows, the rest model rows.
        self.n_real = int(cfg.agent.batch_size * cfg.mbpo.real_ratio)

    def due(self, env_steps: int) -> bool:
        m = self.cfg.mbpo
        return env_steps >= m.init_steps and env_steps % m.model_train_freq == 0

    def model_phase(
        self,
        env_steps: int,
        gen: torch.Generator,
        timer: PhaseTimer,
        status: Callable[[str], None] = _quiet,
    ) -> dict[str, Any]:
        """Fit the model (and rewarder) on all real data, then refill the pool with rollouts.
        ``status`` hears what is happening (the progress bar shows it)."""
        with timer.phase("model"):
            data = self.real.rows()
            status("model fit")
            metrics = self.model_trainer.fit(
                data["obs"],
                data["act"],
                data["next_obs"],
                data["rew"],
                gen,
                on_epoch=lambda epoch, score: status(
                    f"model fit: epoch {epoch}, holdout {self.cfg.model.criterion} {score:.4g}"
                ),
            )
        if metrics["model/nonfinite_rows"]:
            logging.getLogger(__name__).warning(
                "step %d: %d real transitions hold NaN/inf; left out of the model fit",
                env_steps,
                metrics["model/nonfinite_rows"],
            )
        if self.rewarder is not None:
            with timer.phase("rewarder"):
                status("rewarder fit")
                metrics.update(self.rewarder.fit(self.model, data, gen))
        with timer.phase("rollout"):
            # As MBPO: set the length, resize the pool (here: its live window), roll out.
            length = rollout_length(env_steps, self.cfg)
            self.pool.set_window(model_pool_size(self.cfg, length))
            status(f"rollout: {self.cfg.rollout.batch_size} starts x {length} steps")
            # Only the observations: gathering every field of 100k rows would be wasted copies.
            start = self.real.sample(self.cfg.rollout.batch_size, gen, ("obs",))["obs"]
            metrics.update(
                rollout(
                    self.model,
                    self.agent,
                    self.termination_fn,
                    start,
                    length,
                    self.pool,
                    gen,
                    self.rewarder,
                    self.cfg.rewarder,
                )
            )
        metrics["rollout/pool_size"] = self.pool.size
        self.pool_ready = bool(self.pool.size > 0)  # sync-ok: once per model phase
        status("")
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
