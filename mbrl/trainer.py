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

from mbrl import run_state
from mbrl.agents import SAC, ActingPolicy, SACUpdates, build_agent, resolve_act_device
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.compiled import Compiled, tf32_matmuls
from mbrl.config import Config
from mbrl.envs import env_spec, episode_limit
from mbrl.envs.vector import make_vector_env, resolve_vector, vector_dims
from mbrl.evaluator import EVAL_SEED, Evaluator
from mbrl.mbpo import ModelFree, ModelSide, train
from mbrl.runtime import checkpoint, distributed, interrupt, report, runlock
from mbrl.runtime.disk import checkpoint_sizes
from mbrl.runtime.eta import RunClock
from mbrl.runtime.interrupt import StopRequest
from mbrl.runtime.logger import Logger, SilentLogger
from mbrl.runtime.memory import check_memory
from mbrl.runtime.progress import Progress, episodes
from mbrl.runtime.speed import resolve_amp, resolve_compile
from mbrl.runtime.timer import PhaseTimer
from mbrl.runtime.utils import (
    configure_cpu,
    make_generator,
    resolve_device,
    rss_mb,
    seed_everything,
    seeded,
)
from mbrl.runtime.validate import to_yaml
from mbrl.runtime.wandb_sink import wandb_sink
from mbrl.schedule import crossed, run_length

RANK_SEED_STRIDE = 100_003  # rank r's envs and generators: seed + r * stride (rank 0: seed)
# The initial weights of the agent and of the model side, each from a stream of its own
# (seed + offset), apart from the generators' (seed + 1, + 2) and the evaluation's (EVAL_SEED)
AGENT_SEED, MODEL_SEED = 50_021, 70_001


class Trainer:
    """Owns every component of a run. ``run()`` trains until ``cfg.total_steps`` env steps."""

    def __init__(self, cfg: Config, run_dir: str) -> None:
        # Under torchrun each rank runs a Trainer on its share (distributed.rank_config);
        # ``config`` is the whole run's, as saved in config.yaml.
        self.config, self.run_dir = cfg, run_dir
        self.world, self.rank = distributed.world_size(), distributed.rank()
        self.main = self.rank == 0  # evaluates, logs, writes checkpoints
        self.cfg = cfg = distributed.rank_config(cfg, self.world)
        configure_cpu(cfg.threads, cfg.flush_denormal)
        seed_everything(cfg.seed)  # the same initial weights on every rank
        self.device = distributed.start(resolve_device(cfg.device))
        rank_seed = cfg.seed + RANK_SEED_STRIDE * self.rank  # its own envs and batches
        n = cfg.env.num_envs
        mode, version = resolve_vector(cfg.env.vector, n), cfg.env.version
        envs = make_vector_env(cfg.env.name, n, mode, cfg.env.max_episode_steps, version=version)
        obs_dim, act_dim = vector_dims(envs)
        self.dims = (obs_dim, act_dim)
        check_memory(cfg, obs_dim, act_dim, self.device)  # before anything large is allocated
        self.ckpt_sizes = checkpoint_sizes(self.config, obs_dim, act_dim)
        # Never more rows than the run can fill: a 15k-step run does not allocate 1M rows.
        capacity = min(cfg.buffer.capacity, run_length(cfg))
        self.buffer = ReplayBuffer(capacity, transition_fields(obs_dim, act_dim), self.device)
        self.amp = resolve_amp(cfg.amp, self.device, "sac")
        self.model_amp = resolve_amp(cfg.amp, self.device, "model")
        self.compiling = resolve_compile(cfg, self.device, self.world, self.amp)
        self.tf32 = cfg.tf32 and self.device.type == "cuda"  # SAC, model fits and rollouts
        with seeded(cfg.seed + AGENT_SEED, self.device):  # whatever the model is (agent=<name>)
            fast = (self.device, self.amp, self.compiling.on)
            self.agent: SAC = build_agent(obs_dim, act_dim, cfg.agent, *fast)
        act_device = resolve_act_device(cfg.agent.act_device, self.device)
        self.acting = ActingPolicy(self.agent, act_device, cfg.agent.act_sync_every)
        with seeded(cfg.seed + MODEL_SEED, self.device):
            self.model_side = self._build_model_side(obs_dim, act_dim)
        # MBPO: a transition reaches D_env when its episode ends (mbpo.real_data); SAC: at once.
        commit = cfg.mbpo.real_data if cfg.algorithm.name == "mbpo" else "step"
        limit = episode_limit(cfg.env.name, cfg.env.version, cfg.env.max_episode_steps)
        where = (act_device, rank_seed * n, self.world)  # acting device, env seed, ranks
        self.collector = Collector(envs, self.buffer, *where, commit, limit)
        self.evaluator = _evaluator(cfg, act_device) if self.main else None
        self.gens = {
            "train": make_generator(self.device, rank_seed + 1),
            "act": make_generator(act_device, rank_seed + 2),
        }
        # The G updates after each env step: one compiled (CUDA: graphed) block.
        b, gen, graphs = cfg.agent.batch_size, self.gens["train"], self.compiling.graphs
        self.sac_updates = SACUpdates(self.agent, self.model_side, b, gen, graphs, self.tf32)
        self.compiled: dict[str, Compiled] = {}  # what was compiled: warm-up time, failure
        self.updates, self.init_steps = 0, cfg.algorithm.init_steps
        self.best_return, self.best_step = -float("inf"), 0
        self.last_eval: dict[str, float] = {}
        self._learner_metrics: dict[str, Tensor] = {}
        self.timer = PhaseTimer(self.device)
        self.step_hook: Callable[[], None] | None = None  # called after every env step
        self.stopped = ""  # what ended run() early: "Ctrl-C", "max_minutes=... reached"
        self.progress = Progress(cfg.total_steps, 0, False, 0)  # run() makes the real one
        self.clock = RunClock(cfg)  # work and rates, for the estimate of the time left
        resumed = run_state.load(self, cfg.resume) if cfg.resume else None
        if resumed is None:
            distributed.broadcast_(run_state.shared_tensors(self))  # rank 0's weights everywhere
        self.resumed_at = None if resumed is None else self.env_steps
        self.logger: Logger | SilentLogger = SilentLogger()
        if self.main:  # files only now: a resume from a bad checkpoint leaves them untouched
            self._start_files(run_dir)
        if resumed is not None:
            self.logger.load_state_dict(resumed["logger"], self.env_steps)

    def _start_files(self, run_dir: str) -> None:
        runlock.acquire(run_dir)  # one process per run folder
        with open(os.path.join(run_dir, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(to_yaml(self.config))
        self.logger = Logger(
            run_dir,
            self.cfg.logger.tensorboard,
            wandb=wandb_sink(run_dir, self.cfg.logger, asdict(self.cfg)),
        )
        c = self.cfg.checkpoint
        self.ckpt = checkpoint.CheckpointManager(run_dir, c.snapshots, c.buffer_in_snapshots)
        self.ckpt.saved_step = self.resumed_at
        profile = self.cfg.profile.enabled  # (what an immediate quit, Ctrl-C, says from now on)
        interrupt.describe(lambda moment: report.quit_text(moment, run_dir, self.ckpt, profile))

    def _build_model_side(self, obs_dim: int, act_dim: int) -> ModelSide | ModelFree:
        """Where SAC's batches come from: MBPO's model side, or the real buffer alone."""
        cfg = self.cfg
        if cfg.algorithm.name != "mbpo":
            return ModelFree(self.buffer)
        term_fn = env_spec(cfg.env.name).termination_fn
        fast = (self.model_amp, self.compiling.on, self.compiling.graphs, self.tf32)  # (its order)
        args = (obs_dim, act_dim, cfg, self.device, term_fn, self.buffer, self.agent)
        return ModelSide(*args, *fast)

    @property
    def env_steps(self) -> int:
        return self.collector.envstep_count

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> float:
        """Train to ``total_steps``; returns the last evaluation's mean return. Ctrl-C or the end
        of ``max_minutes`` stops after the current step (or fit epoch), with ``ckpt/last.pt``."""
        cfg, stop = self.cfg, StopRequest(lambda: self.progress.waiting_for(), self.cfg.max_minutes)
        self.warm_up()
        if self.main:
            print(report.start_text(self), file=sys.stderr, flush=True)
        shown = cfg.logger.progress and self.main
        self.progress = Progress(cfg.total_steps, self.env_steps, shown, self.init_steps)
        self.model_side.status = self.progress.phase
        try:
            with stop:
                if train(self, stop.agreed):
                    self.stopped = stop.why
                    self._save_now()
        finally:
            self.progress.close()
            self.logger.close()
            if self.evaluator is not None:
                self.evaluator.close()
            self.collector.close()
            if self.main:
                runlock.release(self.run_dir)
        if self.main:
            self.progress.write(report.summary_text(self, self.stopped or "finished"))
        return self.last_eval.get("eval/return_mean", float("nan"))

    def warm_up(self) -> None:
        """Compile the SAC update and the model-fit step now (on copies: the run's state is
        untouched), timed for the start block and as the phase ``compile``; a compile failure
        falls back to eager. Once."""
        if not self.compiling.on or self.compiled:
            return
        if self.main:
            fits = isinstance(self.model_side, ModelSide)
            what = "the SAC update" + (" and the model fit" if fits else "")
            print(f"compiling {what} (torch.compile)...", file=sys.stderr, flush=True)
        with self.timer.phase("compile"), tf32_matmuls(self.tf32):  # (as updates and fits run)
            parts = {"SAC update": self.agent.warm_up()}
            if isinstance(self.model_side, ModelSide):
                parts["model fit"] = self.model_side.model_trainer.warm_up()
        self.compiled = {name: c for name, c in parts.items() if c is not None}

    # --- the loop's hooks (mbrl.mbpo.Run) -------------------------------------------------

    def step_env(self) -> None:
        """One env step into the real buffer; then the CPU acting copy (if any) is refreshed
        when due, before this step's updates are queued, so that it never waits for them."""
        self.collector.step(self.explore)
        self.acting.step(self.collector.num_envs)

    def explore(self, obs: Tensor) -> Tensor:
        """Uniform random actions for ``init_steps``, then the stochastic actor."""
        gen = self.gens["act"]
        if self.env_steps < self.init_steps:
            shape = (obs.shape[0], self.buffer.data["act"].shape[1])
            return torch.rand(shape, generator=gen, device=obs.device) * 2.0 - 1.0
        return self.acting.act(obs, deterministic=False, generator=gen)

    def after_model_phase(self, metrics: dict[str, Any]) -> None:
        self.clock.work.model_phase(metrics, self.cfg.rewarder.mode != "none")
        with self.timer.phase("log"):
            self.logger.log(self.env_steps, metrics)

    def after_step(self, sac_metrics: dict[str, Tensor] | None) -> None:
        """Count the updates, then log, evaluate and checkpoint when due (the last step
        always)."""
        done, n = self.clock.work.done, self.collector.step_size
        done["env"] += n
        if sac_metrics is not None:
            self._learner_metrics = sac_metrics
            self.updates += n * self.cfg.algorithm.updates_per_step
            done["sac"] += n * self.cfg.algorithm.updates_per_step
        self.progress.step(self.env_steps)
        if self.main:  # the bar's ETA from per-phase rates, and once the time left by phase
            self.clock.tick(self.progress, self.timer, self.env_steps)
        self._periodic()
        if self.step_hook is not None:
            self.step_hook()

    def _periodic(self) -> None:
        step, cfg, n = self.env_steps, self.cfg, self.collector.step_size
        last = step >= cfg.total_steps
        if crossed(step, cfg.logger.every, n) or last:  # the last step always
            with self.timer.phase("log"):
                self._log()
        if crossed(step, cfg.eval.every, n) or last:
            is_best = self._evaluate(step) if self.evaluator is not None else False
            with self.timer.phase("checkpoint"):
                self.progress.phase("checkpoint")
                state = self.state_dict()  # every rank sends its own part to rank 0
                if state is not None:  # rank 0
                    self.ckpt.save(state, step, is_best)
            self.clock.work.done["checkpoint"] += 1
            self.progress.phase("")
            if self.last_eval:
                self.progress.eval_return(self.last_eval["eval/return_mean"])

    def _evaluate(self, step: int) -> bool:
        """Evaluate the current weights and log the result; True for the best so far."""
        assert self.evaluator is not None
        with self.timer.phase("eval"):
            self.progress.phase(f"eval: {episodes(self.cfg.eval.episodes)}")
            self.acting.sync()  # evaluate the current weights
            self.last_eval = self.evaluator.run(self._greedy)
        self.clock.work.done["eval"] += self.cfg.eval.episodes
        with self.timer.phase("log"):
            self.logger.log(step, self.last_eval)
        is_best = self.last_eval["eval/return_mean"] > self.best_return
        if is_best:
            self.best_return, self.best_step = self.last_eval["eval/return_mean"], step
        return is_best

    def _save_now(self) -> None:
        """A stop between evaluations: ``ckpt/last.pt`` at this step. No extra metric lines:
        the resumed run then logs exactly what the uninterrupted one would have."""
        state = self.state_dict()
        if state is not None:
            self.ckpt.save_last(state)

    def _greedy(self, obs: Tensor) -> Tensor:
        return self.acting.act(obs, deterministic=True, generator=None)

    def _log(self) -> None:
        metrics: dict[str, Any] = {f"learner/{k}": v for k, v in self._learner_metrics.items()}
        metrics["learner/updates"] = self.updates
        metrics.update({f"buffer/{k}": v for k, v in self.buffer.metrics().items()})
        metrics.update(self.collector.metrics())
        metrics.update(self.timer.metrics())
        metrics["process/rss_mb"] = rss_mb()
        metrics.update(report.ran(self))  # what ran: compiled or eager, graphed or not, why
        self.logger.log(self.env_steps, metrics)

    # --- checkpoints (mbrl.run_state) -----------------------------------------------------

    def state_dict(self) -> dict[str, Any] | None:
        """The run's state on rank 0; None on the other ranks (every rank must call it)."""
        return run_state.state_dict(self, self.logger.state_dict())


def _evaluator(cfg: Config, device: torch.device) -> Evaluator:
    """Deterministic episodes from seeds seed + EVAL_SEED + i, the same at every evaluation."""
    args = (
        cfg.env.name,
        cfg.eval.episodes,
        cfg.seed + EVAL_SEED,
        device,
        cfg.env.max_episode_steps,
    )
    return Evaluator(*args, vector=cfg.eval.vector, version=cfg.env.version)
