"""The training loop (model-free SAC): collect, update, log, evaluate, checkpoint, resume."""

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
from mbrl.config import Config, to_yaml
from mbrl.envs import env_dims, env_spec, make_env
from mbrl.evaluator import Evaluator
from mbrl.mbpo import MBPO
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
        self.mbpo = self._build_mbpo(obs_dim, act_dim)
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

    def _build_mbpo(self, obs_dim: int, act_dim: int) -> MBPO | None:
        """The model-based half for algorithm=mbpo; sets when and how often SAC updates."""
        cfg = self.cfg
        if cfg.algorithm.name != "mbpo":
            self.learning_starts = cfg.algorithm.learning_starts
            self.updates_per_step = cfg.algorithm.updates_per_step
            return None
        self.learning_starts = cfg.mbpo.init_steps
        self.updates_per_step = cfg.mbpo.updates_per_step
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
        settle = cfg.mbpo.model_train_freq if self.mbpo is not None else 100
        print(report.start_text(self), file=sys.stderr, flush=True)
        self.progress = Progress(
            cfg.total_steps, self.env_steps, cfg.logger.progress, self.learning_starts, settle
        )
        outcome = "finished"
        try:
            with stop:
                while self.env_steps < cfg.total_steps:
                    self._iteration()
                    if stop.requested:
                        self._save_now()
                        outcome = "stopped"
                        break
            self.stopped = outcome == "stopped"
        finally:
            self.progress.close()
            self.logger.close()
            self.evaluator.close()
            runlock.release(self.run_dir)
        self.progress.write(report.summary_text(self, outcome))
        return self.last_eval.get("eval/return_mean", float("nan"))

    def _iteration(self) -> None:
        """One env step of Algorithm 2: model phase when due, env step, SAC updates."""
        if self.mbpo is not None and self.mbpo.due(self.env_steps):
            self._model_phase()
        with self.timer.phase("env"):
            self.collector.step(self._explore)
            self.acting.step()
        if self.env_steps > self.learning_starts:
            with self.timer.phase("sac"):
                self._learn()
        self.progress.step(self.env_steps)
        self._periodic()
        if self.step_hook is not None:
            self.step_hook()

    def _explore(self, obs: Tensor) -> Tensor:
        """Uniform random actions until ``learning_starts``, then the stochastic actor."""
        gen = self.gens["act"]
        if self.env_steps < self.learning_starts:
            shape = (obs.shape[0], self.buffer.data["act"].shape[1])
            return torch.rand(shape, generator=gen, device=obs.device) * 2.0 - 1.0
        return self.acting.act(obs, deterministic=False, generator=gen)

    def _model_phase(self) -> None:
        assert self.mbpo is not None
        metrics = self.mbpo.model_phase(
            self.env_steps, self.gens["train"], self.timer, self.progress.phase
        )
        with self.timer.phase("log"):
            self.logger.log(self.env_steps, metrics)

    def _learn(self) -> None:
        gen, batch_size = self.gens["train"], self.cfg.agent.batch_size
        for _ in range(self.updates_per_step):
            if self.mbpo is not None:
                batch = self.mbpo.batch(batch_size, gen)
            else:
                batch = self.buffer.sample(batch_size, gen)
            self._learner_metrics = self.agent.update(batch, gen)
            self.updates += 1

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
            "buffers": self._buffers_state(),
            "mbpo": None if self.mbpo is None else self.mbpo.state_dict(),
            "collector": self.collector.state_dict(),
            "rng": rng_state(self.gens),
            "logger": self.logger.state_dict(),
        }

    def _buffers_state(self) -> dict[str, Any]:
        out = {"real": self.buffer.state_dict()}
        if self.mbpo is not None:
            out["model"] = self.mbpo.pool.state_dict()
        return out

    def _load(self, run_dir: str) -> dict[str, Any]:
        state = checkpoint.load(
            os.path.join(run_dir, "ckpt", "last.pt"), env_name=self.cfg.env.name
        )
        self.agent.load_state_dict(state["agent"])
        self.acting.load_state_dict(state["acting"])
        self.buffer.load_state_dict(state["buffers"]["real"])
        if self.mbpo is not None:
            if state.get("mbpo") is None:
                raise checkpoint.CheckpointError(f"{run_dir} holds no MBPO state (a SAC run?)")
            self.mbpo.load_state_dict(state["mbpo"])
            self.mbpo.pool.load_state_dict(state["buffers"]["model"])
        self.collector.load_state_dict(state["collector"])
        set_rng_state(state["rng"], self.gens)
        self.updates, self.best_return = state["updates"], state["best_return"]
        self.best_step = state.get("best_step", 0)
        self.last_eval = state["last_eval"]
        return state
