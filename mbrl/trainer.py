"""A run: builds every component, runs the loop (``mbrl.mbpo.train``), and around it logs,
evaluates, checkpoints, resumes and reports."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor

from mbrl.agents import SAC, ActingPolicy, resolve_act_device
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.config import Config
from mbrl.envs import env_dims, env_spec, make_env
from mbrl.evaluator import Evaluator
from mbrl.mbpo import MBPO, ModelFree, train
from mbrl.runtime import checkpoint, report, runlock
from mbrl.runtime.interrupt import StopRequest
from mbrl.runtime.logger import Logger
from mbrl.runtime.memory import check_memory
from mbrl.runtime.progress import Progress, episodes
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import (
    configure_cpu,
    make_generator,
    resolve_amp,
    resolve_device,
    rng_state,
    rss_mb,
    seed_everything,
    set_rng_state,
)
from mbrl.runtime.validate import to_yaml
from mbrl.runtime.wandb_sink import WandbSink


class Trainer:
    """Owns every component of a run. ``run()`` trains until ``cfg.total_steps`` env steps."""

    def __init__(self, cfg: Config, run_dir: str) -> None:
        self.cfg, self.run_dir = cfg, run_dir
        configure_cpu(cfg.threads, cfg.flush_denormal)
        seed_everything(cfg.seed)
        self.device = resolve_device(cfg.device)
        env = make_env(cfg.env.name, cfg.env.max_episode_steps)
        obs_dim, act_dim = env_dims(env)
        self.dims = (obs_dim, act_dim)
        check_memory(cfg, obs_dim, act_dim, self.device)  # before anything large is allocated
        # Never more rows than the run can fill: a 15k-step run does not allocate 1M rows.
        capacity = min(cfg.buffer.capacity, cfg.total_steps)
        self.buffer = ReplayBuffer(capacity, transition_fields(obs_dim, act_dim), self.device)
        self.amp = resolve_amp(cfg.amp, self.device)
        self.agent = SAC(obs_dim, act_dim, cfg.agent, self.device, self.amp, cfg.compile)
        act_device = resolve_act_device(cfg.agent.act_device, self.device)
        self.acting = ActingPolicy(self.agent, act_device, cfg.agent.act_sync_every)
        self.data = self._build_data(obs_dim, act_dim)
        self.collector = Collector(env, self.buffer, act_device, seed=cfg.seed)
        self.evaluator = Evaluator(
            cfg.env.name,
            cfg.eval.episodes,
            cfg.seed + 10_000,
            act_device,
            cfg.env.max_episode_steps,
        )
        self.gens = {
            "train": make_generator(self.device, cfg.seed + 1),
            "act": make_generator(act_device, cfg.seed + 2),
        }
        self.updates = 0
        self.init_steps = cfg.algorithm.init_steps
        self.best_return, self.best_step = -float("inf"), 0
        self.last_eval: dict[str, float] = {}
        self._learner_metrics: dict[str, Tensor] = {}
        self.timer = PhaseTimer(self.device)
        self.step_hook: Callable[[], None] | None = None  # called after every env step
        self.stopped = False  # set when Ctrl-C ended run() early
        self.progress = Progress(cfg.total_steps, 0, False, 0, 0)  # run() makes the real one
        resumed = self._load(cfg.resume) if cfg.resume else None
        # Files are written only now: a resume from a bad checkpoint leaves the folder untouched.
        runlock.acquire(run_dir)  # one process per run folder
        self.resumed_at = None if resumed is None else self.env_steps
        with open(os.path.join(run_dir, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(to_yaml(cfg))
        self.logger = Logger(run_dir, cfg.logger.tensorboard, wandb=self._wandb(run_dir))
        if resumed is not None:
            self.logger.load_state_dict(resumed["logger"], self.env_steps)
        self.ckpt = checkpoint.CheckpointManager(
            run_dir, cfg.checkpoint.snapshots, cfg.checkpoint.buffer_in_snapshots
        )

    def _wandb(self, run_dir: str) -> WandbSink | None:
        lc = self.cfg.logger
        if not lc.wandb:
            return None
        settings = {
            "project": lc.wandb_project,
            "entity": lc.wandb_entity,
            "group": lc.wandb_group,
            "tags": lc.wandb_tags,
            "name": lc.wandb_name,
            "mode": lc.wandb_mode,
        }
        return WandbSink(run_dir, settings, asdict(self.cfg))

    def _build_data(self, obs_dim: int, act_dim: int) -> MBPO | ModelFree:
        """Where SAC's batches come from: MBPO's model side, or the real buffer alone."""
        cfg = self.cfg
        if cfg.algorithm.name != "mbpo":
            return ModelFree(self.buffer)
        term_fn = env_spec(cfg.env.name).termination_fn
        return MBPO(
            obs_dim,
            act_dim,
            cfg,
            self.device,
            term_fn,
            self.buffer,
            self.agent,
            amp=self.amp,
            compile=cfg.compile,
        )

    @property
    def env_steps(self) -> int:
        return self.collector.envstep_count

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> float:
        """Train to ``total_steps``; returns the last evaluation's mean return. Ctrl-C stops
        after the current step with a checkpoint in ``ckpt/last.pt`` (a second one at once)."""
        cfg, stop = self.cfg, StopRequest()
        print(report.start_text(self), file=sys.stderr, flush=True)
        # The ETA shows once a whole model-phase period has been timed (fits included).
        settle = self.data.steps_between_phases
        self.progress = Progress(
            cfg.total_steps, self.env_steps, cfg.logger.progress, self.init_steps, settle
        )
        self.data.status = self.progress.phase
        try:
            with stop:
                self.stopped = train(self, stop)
                if self.stopped:
                    self._save_now()
        finally:
            self.progress.close()
            self.logger.close()
            self.evaluator.close()
            runlock.release(self.run_dir)
        self.progress.write(report.summary_text(self, "stopped" if self.stopped else "finished"))
        return self.last_eval.get("eval/return_mean", float("nan"))

    # --- the loop's hooks (mbrl.mbpo.Run) -------------------------------------------------

    def step_env(self) -> None:
        """One env step into the real buffer; then the CPU acting copy (if any) is refreshed
        when due, before this step's updates are queued, so that it never waits for them."""
        self.collector.step(self.explore)
        self.acting.step()

    def explore(self, obs: Tensor) -> Tensor:
        """Uniform random actions for ``init_steps``, then the stochastic actor."""
        gen = self.gens["act"]
        if self.env_steps < self.init_steps:
            shape = (obs.shape[0], self.buffer.data["act"].shape[1])
            return torch.rand(shape, generator=gen, device=obs.device) * 2.0 - 1.0
        return self.acting.act(obs, deterministic=False, generator=gen)

    def after_model_phase(self, metrics: dict[str, Any]) -> None:
        with self.timer.phase("log"):
            self.logger.log(self.env_steps, metrics)

    def after_step(self, sac_metrics: dict[str, Tensor] | None) -> None:
        """Count the updates, then log, evaluate and checkpoint when due (the last step
        always)."""
        if sac_metrics is not None:
            self._learner_metrics = sac_metrics
            self.updates += self.cfg.algorithm.updates_per_step
        self.progress.step(self.env_steps)
        self._periodic()
        if self.step_hook is not None:
            self.step_hook()

    def _periodic(self) -> None:
        step, cfg = self.env_steps, self.cfg
        if step % cfg.logger.every == 0 or step == cfg.total_steps:  # the last step always
            with self.timer.phase("log"):
                self._log()
        if step % cfg.eval.every == 0 or step == cfg.total_steps:
            with self.timer.phase("eval"):
                self.progress.phase(f"eval: {episodes(cfg.eval.episodes)}")
                self.acting.sync()  # evaluate the current weights
                self.last_eval = self.evaluator.run(self._greedy)
            with self.timer.phase("log"):
                self.logger.log(step, self.last_eval)
            is_best = self.last_eval["eval/return_mean"] > self.best_return
            if is_best:
                self.best_return, self.best_step = self.last_eval["eval/return_mean"], step
            with self.timer.phase("checkpoint"):
                self.progress.phase("checkpoint")
                self.ckpt.save(self.state_dict(), step, is_best)
            self.progress.phase("")
            self.progress.eval_return(self.last_eval["eval/return_mean"])

    def _save_now(self) -> None:
        """A stop between evaluations: ``ckpt/last.pt`` at this step. No extra metric lines:
        the resumed run then logs exactly what the uninterrupted one would have."""
        self.ckpt.save_last(self.state_dict())

    def _greedy(self, obs: Tensor) -> Tensor:
        return self.acting.act(obs, deterministic=True, generator=None)

    def _log(self) -> None:
        metrics: dict[str, Any] = {f"learner/{k}": v for k, v in self._learner_metrics.items()}
        metrics["learner/updates"] = self.updates
        metrics.update({f"buffer/{k}": v for k, v in self.buffer.metrics().items()})
        metrics.update(self.collector.metrics())
        metrics.update(self.timer.metrics())
        metrics["process/rss_mb"] = rss_mb()
        self.logger.log(self.env_steps, metrics)

    # --- checkpoints ----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": checkpoint.FORMAT_VERSION,
            "env": self.cfg.env.name,
            "config": asdict(self.cfg),
            "step": self.env_steps,
            "updates": self.updates,
            "best_return": self.best_return,
            "best_step": self.best_step,
            "last_eval": dict(self.last_eval),
            "agent": self.agent.state_dict(),
            "acting": self.acting.state_dict(),
            "buffers": {name: b.state_dict() for name, b in self._buffers().items()},
            "algorithm": self.data.state_dict(),
            "collector": self.collector.state_dict(),
            "rng": rng_state(self.gens),
            "logger": self.logger.state_dict(),
        }

    def _buffers(self) -> dict[str, ReplayBuffer]:
        """The real buffer, and the model pool in an MBPO run."""
        return {"real": self.buffer, **self.data.buffers()}

    def _load(self, run_dir: str) -> dict[str, Any]:
        state = checkpoint.load(
            os.path.join(run_dir, "ckpt", "last.pt"), env_name=self.cfg.env.name
        )
        self.agent.load_state_dict(state["agent"])
        self.acting.load_state_dict(state["acting"])
        for name, buffer in self._buffers().items():
            buffer.load_state_dict(state["buffers"][name])
        try:
            self.data.load_state_dict(state["algorithm"])
        except ValueError as err:
            raise checkpoint.CheckpointError(f"{run_dir}: {err}") from None
        self.collector.load_state_dict(state["collector"])
        set_rng_state(state["rng"], self.gens)
        self.updates, self.best_return = state["updates"], state["best_return"]
        self.best_step = state.get("best_step", 0)
        self.last_eval = state["last_eval"]
        return state
