"""MBPO (Janner et al. 2019), Algorithm 2: :func:`train` is the loop on one screen. The model
side (model fits, the rewarder, rollouts into the model pool, batches mixed from the real
buffer and the pool) is :class:`ModelSide`; model-free SAC is the same loop with
:class:`ModelFree`, whose model phase is never due and whose batches come from the real buffer
alone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl.agents import SAC, SACUpdates
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.compiled import tf32_matmuls
from mbrl.config import Config
from mbrl.envs.termination import TerminationFn
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.rewarder import Rewarder
from mbrl.rollout import rollout
from mbrl.schedule import crossed, model_pool_size, pool_capacity, rollout_length

SAC_FIELDS = ("obs", "act", "rew", "next_obs", "terminated")


def _quiet(text: str) -> None:
    """A status sink that shows nothing."""


class Phases(Protocol):
    """Times the loop's phases: ``with timer.phase("sac"): ...`` (the trainer's Phases)."""

    def phase(self, name: str) -> AbstractContextManager[Any]: ...


class Run(Protocol):
    """What the loop needs from a run (``mbrl.trainer.Trainer``): its parts and three hooks."""

    cfg: Config
    agent: SAC
    sac_updates: SACUpdates  # n updates, each on a model_side.batch (compiled / graphed)
    model_side: ModelSide | ModelFree
    collector: Collector  # D_env's writer; counts env steps
    gens: dict[str, torch.Generator]

    @property
    def timer(self) -> Phases: ...  # the phase timer

    def step_env(self) -> None: ...  # one env step: random actions first, then the policy

    def after_model_phase(self, metrics: dict[str, Any]) -> None: ...  # log its metrics

    def after_step(self, sac_metrics: dict[str, Tensor] | None) -> None: ...  # log, eval, ckpt


def train(run: Run, stop: Callable[[], bool]) -> bool:
    """Algorithm 2 until ``cfg.total_steps`` env steps; True when ``stop()`` (a Ctrl-C, agreed
    by every rank) ended it early.

    D_env is ``run.collector``'s real buffer, D_model the model pool in ``run.model_side``.
    With ``env.num_envs`` copies (on each of the ranks of a torchrun), an iteration takes
    n = copies x ranks env steps at once and then n x G updates, so updates per env step (and
    every schedule in env steps) stay MBPO's."""
    cfg, model_side, timer, collector = run.cfg, run.model_side, run.timer, run.collector
    gen, n = run.gens["train"], collector.step_size
    while collector.envstep_count < cfg.total_steps:
        # every model_train_freq env steps: train the model on D_env, then roll it out from
        # D_env's states into D_model
        if model_side.model_phase_due(collector.envstep_count, n):
            metrics = model_side.model_phase(collector.envstep_count, gen, timer, stop)
            if metrics is None:  # Ctrl-C during the fit: paused after an epoch, resumable
                return True
            run.after_model_phase(metrics)
        with timer.phase("env"):  # take an action in each env; add the transitions to D_env
            run.step_env()
        sac_metrics = None
        if collector.envstep_count > cfg.algorithm.init_steps and model_side.ready():
            with timer.phase("sac"):  # G policy updates per env step, on D_env and D_model
                sac_metrics = run.sac_updates(n * cfg.algorithm.updates_per_step)
        run.after_step(sac_metrics)
        if stop():
            return True
    return False


class ModelFree:
    """Model-free SAC's side of the loop: no model phase, batches from the real buffer."""

    def __init__(self, real: ReplayBuffer) -> None:
        self.real = real
        self.status: Callable[[str], None] = _quiet  # (nothing to report: no model phase)

    def model_phase_due(self, env_steps: int, step_size: int) -> bool:
        return False

    def ready(self) -> bool:
        """Whether SAC's batches can be drawn (D_env has rows)."""
        return self.real.offered > 0

    def model_phase(
        self,
        env_steps: int,
        gen: torch.Generator,
        timer: Phases,
        stop: Callable[[], bool] | None = None,
    ) -> dict[str, Any] | None:
        raise RuntimeError("model-free SAC has no model phase")

    def batch(self, batch_size: int, gen: torch.Generator) -> dict[str, Tensor]:
        return self.real.sample(batch_size, gen, SAC_FIELDS)

    def batch_layout(self) -> Hashable:
        return "real"

    def buffers(self) -> dict[str, ReplayBuffer]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError("a model-free run cannot load MBPO state (the checkpoint is MBPO's)")


class ModelSide:
    """The model side of the loop: :meth:`model_phase` (fit, rollouts) and :meth:`batch`."""

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
        graphs: bool = False,
        tf32: bool = False,
    ) -> None:
        """The model's ``amp``; ``compile`` its fit step (``graphs``: as CUDA graphs);
        ``tf32``: fp32 matmuls of fits and rollouts on TF32 tensor cores (CUDA)."""
        self.cfg, self.real, self.agent, self.termination_fn = cfg, real, agent, termination_fn
        self.model = DynamicsModel(obs_dim, act_dim, cfg.model).to(device)
        self.model_trainer = ModelTrainer(self.model, cfg.model, amp, compile, graphs)
        self.tf32 = tf32
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
        self.status: Callable[[str], None] = _quiet  # told what the model phase is doing

    def model_phase_due(self, env_steps: int, step_size: int) -> bool:
        """Every ``model_train_freq`` env steps from ``init_steps`` on (``step_size``: env
        steps per iteration, the number of env copies)."""
        freq = self.cfg.mbpo.model_train_freq
        due = env_steps >= self.cfg.algorithm.init_steps and crossed(env_steps, freq, step_size)
        # (With episode commits D_env is empty until an episode has ended: no fit before.)
        return due and self.real.offered >= 2

    def ready(self) -> bool:
        """Whether SAC's batches can be drawn: D_env has rows (with episode commits, once an
        episode has ended)."""
        return self.real.offered > 0

    def model_phase(
        self,
        env_steps: int,
        gen: torch.Generator,
        timer: Phases,
        stop: Callable[[], bool] | None = None,
    ) -> dict[str, Any] | None:
        """Fit the model (and rewarder) on all real data, then refill the pool with rollouts.
        ``self.status`` hears what is happening (the progress bar shows it). None: ``stop()``
        paused the fit after an epoch; the next call goes on with it."""
        with tf32_matmuls(self.tf32):
            return self._model_phase(env_steps, gen, timer, stop)

    def _model_phase(
        self,
        env_steps: int,
        gen: torch.Generator,
        timer: Phases,
        stop: Callable[[], bool] | None,
    ) -> dict[str, Any] | None:
        status = self.status
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
                    f"model fit: epoch {epoch}, holdout {self.cfg.model.select_by} {score:.4g}"
                ),
                stop=stop,
            )
        if metrics is None:
            return None
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

    def buffers(self) -> dict[str, ReplayBuffer]:
        """Buffers a checkpoint holds besides the real one."""
        return {"model": self.pool}

    def batch(self, batch_size: int, gen: torch.Generator) -> dict[str, Tensor]:
        """A SAC batch: real_ratio of it from the real buffer, the rest from the model pool."""
        if not self.pool_ready or self.n_real >= batch_size:
            return self.real.sample(batch_size, gen, SAC_FIELDS)
        fake = self.pool.sample(batch_size - self.n_real, gen, SAC_FIELDS)
        if self.n_real == 0:
            return fake
        real = self.real.sample(self.n_real, gen, SAC_FIELDS)
        return {k: torch.cat([real[k], fake[k]]) for k in SAC_FIELDS}

    def batch_layout(self) -> Hashable:
        """Which buffers :meth:`batch` draws from now (the real buffer alone until the pool
        has rows)."""
        return "mixed" if self.pool_ready else "real"

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "model_trainer": self.model_trainer.state_dict(),
            "rewarder": None if self.rewarder is None else self.rewarder.state_dict(),
            "pool_ready": self.pool_ready,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            raise ValueError("an MBPO run cannot load a model-free checkpoint (no MBPO state)")
        self.model.load_state_dict(state["model"])
        self.model_trainer.load_state_dict(state["model_trainer"])
        if self.rewarder is not None and state["rewarder"] is not None:
            self.rewarder.load_state_dict(state["rewarder"])
        self.pool_ready = state["pool_ready"]
