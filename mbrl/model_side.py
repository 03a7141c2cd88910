"""Where SAC's batches come from, and the model phase that fills the model pool: MBPO's
:class:`ModelSide` (model fits, the rewarder, rollouts into the pool, batches mixed from the
real buffer and the pool) and model-free SAC's :class:`ModelFree` (no model phase, batches
from the real buffer alone). Both offer the same methods, so the loop (``mbrl.mbpo.MBPO``)
never asks which one it has."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl.agents import SAC
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.compiled import Compiled, Speed, tf32_matmuls
from mbrl.config import Config
from mbrl.envs.termination import TerminationFn
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.rewarder import Rewarder
from mbrl.rollout import rollout
from mbrl.schedule import crossed, model_pool_size, pool_capacity, rollout_length

SAC_FIELDS = ("obs", "act", "rew", "next_obs", "terminated")
Status = Callable[[str], None]  # told what the model phase is doing (the progress bar)


def quiet(text: str) -> None:
    """A status sink that shows nothing."""


class Phases(Protocol):
    """Times the loop's phases: ``with timer.phase("sac"): ...`` (the trainer's PhaseTimer)."""

    def phase(self, name: str) -> AbstractContextManager[Any]: ...


class ModelFree:
    """Model-free SAC's side of the loop: no model phase, batches from the real buffer."""

    def __init__(self, real: ReplayBuffer) -> None:
        self.real = real
        self.fits = 0  # (no model: never fitted)
        self.paused_row_epochs = 0  # (nor paused)
        self.model_trainer = None  # (no model to fit)
        self.pool_ready = False  # (no model pool)

    def model_phase_due(self, env_steps: int, step_size: int) -> bool:
        return False

    def ready(self) -> bool:
        """Whether SAC's batches can be drawn (D_env has rows)."""
        return self.real.offered > 0

    def model_phase(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        """(Never due: see :meth:`model_phase_due`.)"""
        raise RuntimeError("model-free SAC has no model phase")

    def refill(self, *args: Any, **kwargs: Any) -> None:
        """(No model pool to refill.)"""

    def warm_up(self) -> dict[str, Compiled]:
        return {}  # (nothing of its own to compile)

    def ran(self) -> dict[str, str]:
        return {}

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
        speed: Speed | None = None,
    ) -> None:
        """``speed``: the model's amp, whether its fit step is compiled (and graphed), and
        TF32 for fits and rollouts (default: eager fp32)."""
        speed = speed or Speed()
        self.cfg, self.real, self.agent, self.termination_fn = cfg, real, agent, termination_fn
        self.model = DynamicsModel(obs_dim, act_dim, cfg.model).to(device)
        self.model_trainer = ModelTrainer(
            self.model, cfg.model, amp=speed.model_amp, compile=speed.compile, graphs=speed.graphs
        )
        self.tf32 = speed.tf32
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

    @property
    def fits(self) -> int:
        """Model fits so far."""
        return self.model_trainer.fits

    @property
    def paused_row_epochs(self) -> int:
        """Rows x epochs of a model fit paused by a stop request (0: none)."""
        return self.model_trainer.paused_row_epochs

    def warm_up(self) -> dict[str, Compiled]:
        """Compile the model's fit step now (on copies: see ``ModelTrainer.warm_up``)."""
        compiled = self.model_trainer.warm_up()
        return {} if compiled is None else {"model fit": compiled}

    def ran(self) -> dict[str, str]:
        """What the fit steps ran (``compiled, graphed``, ``eager``, ...)."""
        return {"speed/model_fit": self.model_trainer.step.ran}

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
        status: Status = quiet,
        fitted: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Fit the model (and rewarder) on all real data, then refill the pool with rollouts.
        ``status`` hears what is happening (the progress bar shows it). None: ``stop()``
        paused the fit after an epoch; the next call goes on with it. ``fitted``: the model
        fit's metrics where it was made already (batched seeds fit together,
        ``mbrl.models.seed_fit``): the phase goes on from the rewarder."""
        with tf32_matmuls(self.tf32):
            return self._model_phase(env_steps, gen, timer, stop, status, fitted)

    def _model_phase(
        self,
        env_steps: int,
        gen: torch.Generator,
        timer: Phases,
        stop: Callable[[], bool] | None,
        status: Status,
        fitted: dict[str, Any] | None,
    ) -> dict[str, Any] | None:
        data = self.real.rows()
        metrics = dict(fitted) if fitted is not None else self._fit(data, gen, timer, stop, status)
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
        metrics.update(self._rollouts(env_steps, gen, timer, status))
        status("")
        return metrics

    def _fit(
        self,
        data: dict[str, Tensor],
        gen: torch.Generator,
        timer: Phases,
        stop: Callable[[], bool] | None,
        status: Status,
    ) -> dict[str, Any] | None:
        with timer.phase("model"):
            status("model fit")
            return self.model_trainer.fit(
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

    def _rollouts(
        self, env_steps: int, gen: torch.Generator, timer: Phases, status: Status
    ) -> dict[str, Any]:
        """Refill the model pool: rollouts of the scheduled length from real start states."""
        with timer.phase("rollout"):
            # As MBPO: set the length, resize the pool (here: its live window), roll out.
            length = rollout_length(env_steps, self.cfg)
            self.pool.set_window(model_pool_size(self.cfg, length))
            status(f"rollout: {self.cfg.rollout.batch_size} starts x {length} steps")
            # Only the observations: gathering every field of 100k rows would be wasted copies.
            start = self.real.sample(self.cfg.rollout.batch_size, gen, ("obs",))["obs"]
            metrics = rollout(
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
        metrics["rollout/pool_size"] = self.pool.size
        self.pool_ready = bool(self.pool.size > 0)  # sync-ok: once per model phase
        return metrics

    def refill(
        self, env_steps: int, gen: torch.Generator, timer: Phases, status: Status = quiet
    ) -> None:
        """A resumed run whose checkpoint left the model pool out (``checkpoint.pool=false``):
        one model phase's rollouts from the saved model, of the length the last model phase
        used. The pool then holds that phase's rows where an uninterrupted run would hold up
        to ``retain_epochs`` epochs of them, until the next phases add theirs: the run goes on
        from the same weights, but not bit for bit as it would have."""
        last_phase = env_steps - env_steps % self.cfg.mbpo.model_train_freq
        self._rollouts(last_phase, gen, timer, status)
        status("")

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
        """Which buffers :meth:`batch` draws from now, and how many rows from each (the real
        buffer alone until the pool has rows): a graphed update block is captured per layout,
        so a run that changes ``n_real`` gets its new split captured, not the old replayed."""
        return ("mixed", self.n_real) if self.pool_ready else "real"

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
