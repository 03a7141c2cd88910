"""MBPO (Janner et al. 2019) as one object: :class:`MBPO` owns the agent, the real buffer D_env,
the env collector, the model side (the dynamics model, the rewarder and the model pool
D_model), the SAC update block, the random generators and the counters. :meth:`MBPO.step` is
what Algorithm 2 does between two env steps; a run calls it until its step count::

    while algo.env_steps < total_steps:
        observe(algo.step(timer, stop))

Model-free SAC (``algorithm=sac``) is the same object with the model side
:class:`~mbrl.model_side.ModelFree`: its model phase is never due and its batches come from
D_env alone. What the object saves is :meth:`MBPO.state_dict`; the run around it (logs,
evaluation, checkpoints, the time left) only reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from mbrl.agents import SAC, ActingPolicy, SACUpdates, build_agent, resolve_act_device
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.collector import Collector
from mbrl.compiled import Compiled, Speed, tf32_matmuls
from mbrl.config import Config
from mbrl.envs import env_spec, episode_limit
from mbrl.envs.vector import VectorEnvs, vector_dims
from mbrl.model_side import ModelFree, ModelSide, Phases, Status, quiet
from mbrl.schedule import run_length
from mbrl.seeding import make_generator, rng_state, seeded, set_rng_state

RANK_SEED_STRIDE = 100_003  # rank r's envs and generators: seed + r * stride (rank 0: seed)
# The initial weights of the agent and of the model side, each from a stream of its own
# (seed + offset), apart from the generators' (seed + 1, + 2) and the evaluation's (EVAL_SEED)
AGENT_SEED, MODEL_SEED = 50_021, 70_001
# A rank's own part of the state (its buffers, env copies, generators, acting copy); the rest
# is the same on every rank of a run on several processes
OWN = ("acting", "buffers", "collector", "rng")


@dataclass
class Step:
    """What one :meth:`MBPO.step` did. ``paused``: a stop request paused the model fit after an
    epoch (no env step was taken; the next step goes on with the fit)."""

    env_steps: int = 0  # env steps taken (all env copies and ranks)
    updates: int = 0  # SAC updates made
    model_step: int | None = None  # the env step at which a model phase ran, if one did
    model: dict[str, Any] | None = None  # its metrics (model/*, rewarder/*, rollout/*)
    sac: dict[str, Tensor] | None = None  # the last update's metrics (device tensors)
    paused: bool = False


class Learner(Protocol):
    """What a run saves of its agent's training: ``SAC`` or a batched seed's slot."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def never() -> bool:
    """A stop request that never comes."""
    return False


class Untimed:
    """A timer that times nothing (``MBPO.step`` without one)."""

    def phase(self, name: str) -> AbstractContextManager[Any]:
        return nullcontext()


class MBPO:
    """One MBPO run's algorithm (or model-free SAC's, ``cfg.algorithm.name == "sac"``) on the
    env copies ``envs``; ``rank``/``world``: this process's share of a run on several."""

    def __init__(
        self,
        cfg: Config,
        envs: VectorEnvs,
        device: torch.device,
        speed: Speed | None = None,
        rank: int = 0,
        world: int = 1,
    ) -> None:
        self.cfg, self.device, self.speed = cfg, device, speed or Speed()
        self.init_steps = cfg.algorithm.init_steps  # uniform-random env steps first
        self.updates_per_step = cfg.algorithm.updates_per_step  # MBPO's G
        obs_dim, act_dim = self.dims = vector_dims(envs)
        rank_seed = cfg.seed + RANK_SEED_STRIDE * rank  # its own envs and batches
        # Never more rows than the run can fill: a 15k-step run does not allocate 1M rows.
        capacity = min(cfg.buffer.capacity, run_length(cfg))
        self.buffer = ReplayBuffer(capacity, transition_fields(obs_dim, act_dim), device)
        s = self.speed
        with seeded(cfg.seed + AGENT_SEED, device):  # whatever the model is (agent=<name>)
            self.agent: SAC = build_agent(
                obs_dim, act_dim, cfg.agent, device=device, amp=s.sac_amp, compile=s.compile
            )
        # What holds the agent's training state (weights, optimizer): the agent, or with
        # batched seeds its seed's slot of the batch (mbrl.batched_seeds).
        self.learner: Learner = self.agent
        act_device = resolve_act_device(cfg.agent.act_device, device)
        self.acting = ActingPolicy(self.agent, act_device, cfg.agent.act_sync_every)
        with seeded(cfg.seed + MODEL_SEED, device):
            self.model_side = self._model_side(obs_dim, act_dim)
        # MBPO: a transition reaches D_env when its episode ends (mbpo.real_data); SAC: at once.
        commit = cfg.mbpo.real_data if cfg.algorithm.name == "mbpo" else "step"
        limit = episode_limit(cfg.env.name, cfg.env.version, cfg.env.max_episode_steps)
        self.collector = Collector(
            envs, self.buffer, act_device, rank_seed * envs.num_envs, world, commit, limit
        )
        self.gens = {
            "train": make_generator(device, rank_seed + 1),
            "act": make_generator(act_device, rank_seed + 2),
        }
        # The G updates after each env step: one compiled (CUDA: graphed) block.
        self.sac_updates = SACUpdates(
            self.agent,
            self.model_side,
            cfg.agent.batch_size,
            self.gens["train"],
            graphs=s.graphs,
            tf32=s.tf32,
        )
        self.updates = 0  # SAC updates so far (all ranks)
        self._refill = False  # resumed from a checkpoint without the model pool: refill it

    def _model_side(self, obs_dim: int, act_dim: int) -> ModelSide | ModelFree:
        """Where SAC's batches come from: MBPO's model side, or the real buffer alone."""
        if self.cfg.algorithm.name != "mbpo":
            return ModelFree(self.buffer)
        term_fn = env_spec(self.cfg.env.name).termination_fn
        args = (obs_dim, act_dim, self.cfg, self.device, term_fn, self.buffer, self.agent)
        return ModelSide(*args, speed=self.speed)

    @property
    def env_steps(self) -> int:
        return self.collector.envstep_count

    # --- Algorithm 2 ------------------------------------------------------------------------

    def step(
        self, timer: Phases | None = None, stop: Callable[[], bool] = never, status: Status = quiet
    ) -> Step:
        """Between two env steps: every ``model_train_freq`` env steps, train the model on D_env
        and roll it out from D_env's states into D_model; take an action in each env and add
        the transitions to D_env; then G policy updates on batches from D_env and D_model.

        With ``env.num_envs`` copies (on each rank of a torchrun), a step takes n = copies x
        ranks env steps at once and then n x G updates, so updates per env step (and every
        schedule in env steps) stay MBPO's. ``timer`` times the phases, ``stop()`` may pause a
        model fit after an epoch, ``status`` hears what the model phase is doing.

        Code added to the step belongs in :meth:`collect` (or what it calls): batched seeds
        (mbrl/batched_seeds.py) call each seed's ``collect`` and make the updates together,
        so code here, outside it, would not run for them."""
        timer = timer or Untimed()
        out = self.collect(timer, stop, status)
        out.updates = self.updates_due(out.env_steps)
        if out.updates:
            with timer.phase("sac"):
                out.sac = self.sac_updates(out.updates)
            self.updates += out.updates
        return out

    def collect(
        self,
        timer: Phases | None = None,
        stop: Callable[[], bool] = never,
        status: Status = quiet,
        fitted: dict[str, Any] | None = None,
    ) -> Step:
        """The step up to its updates: the model phase when due, then one env step in each
        env copy (batched seeds, ``mbrl.batched_seeds``, make the seeds' model fits and
        updates together: ``fitted`` is then the model fit's metrics, made already)."""
        timer = timer or Untimed()
        n, out = self.collector.step_size, Step()
        due = self.model_side.model_phase_due(self.env_steps, n)
        if fitted is not None and not due:
            raise RuntimeError(f"step {self.env_steps}: a model fit was made, its phase not due")
        if self._refill and not due:  # (a model phase refills the pool anyway)
            self.model_side.refill(self.env_steps, self.gens["train"], timer, status)
        self._refill = False
        if due:
            out.model_step = self.env_steps
            out.model = self.model_side.model_phase(
                self.env_steps, self.gens["train"], timer, stop, status, fitted
            )
            if out.model is None:  # a stop request during the fit: paused after an epoch
                return Step(paused=True)
        with timer.phase("env"):
            self.collector.step(self._explore)
            # The CPU acting copy (if any) is refreshed when due, before this step's updates
            # are queued, so that it never waits for them.
            self.acting.step(self.collector.num_envs)
        out.env_steps = n
        return out

    def updates_due(self, env_steps: int) -> int:
        """The SAC updates after a step of ``env_steps`` env steps: G per env step once past
        the random steps and once the model side can give batches; else none."""
        if env_steps and self.env_steps > self.init_steps and self.model_side.ready():
            return env_steps * self.updates_per_step
        return 0

    def _explore(self, obs: Tensor) -> Tensor:
        """Uniform random actions for ``init_steps``, then the stochastic actor."""
        gen = self.gens["act"]
        if self.env_steps < self.init_steps:
            shape = (obs.shape[0], self.dims[1])
            return torch.rand(shape, generator=gen, device=obs.device) * 2.0 - 1.0
        return self.acting.act(obs, deterministic=False, generator=gen)

    def act(self, obs: Tensor) -> Tensor:
        """The current policy's deterministic actions (evaluation): obs [N, o] -> [N, a]."""
        return self.acting.act(obs, deterministic=True, generator=None)

    # --- what the run around it reads -------------------------------------------------------

    def warm_up(self) -> dict[str, Compiled]:
        """Compile the SAC update (and the model's fit step) now, on copies: the state is left
        as it was. What was compiled, by name (empty when not compiling)."""
        with tf32_matmuls(self.speed.tf32):  # (as updates and fits run: no recompiling)
            parts = {"SAC update": self.agent.warm_up(), **self.model_side.warm_up()}
        return {name: c for name, c in parts.items() if c is not None}

    def ran(self) -> dict[str, str]:
        """What actually ran so far: ``speed/sac_update`` and (MBPO) ``speed/model_fit``,
        e.g. ``compiled, graphed`` or ``eager (compile failed: ...)``."""
        return {"speed/sac_update": self.sac_updates.ran, **self.model_side.ran()}

    @property
    def fits(self) -> int:
        """Model fits so far (0 for model-free SAC)."""
        return self.model_side.fits

    @property
    def paused_row_epochs(self) -> int:
        """Training rows x epochs of a model fit a stop request paused (0: none): the run's
        time estimate counts them as the pausing process's work, not the resuming one's."""
        return self.model_side.paused_row_epochs

    def buffers(self) -> dict[str, ReplayBuffer]:
        """The real buffer, and the model pool in an MBPO run."""
        return {"real": self.buffer, **self.model_side.buffers()}

    def metrics(self) -> dict[str, Any]:
        """The buffers' and the collector's metrics (read once per log interval)."""
        out: dict[str, Any] = {"learner/updates": self.updates}
        out.update({f"buffer/{k}": v for k, v in self.buffer.metrics().items()})
        out.update(self.collector.metrics())
        return out

    def close(self) -> None:
        self.collector.close()

    # --- state --------------------------------------------------------------------------------

    def shared_state(self) -> dict[str, Any]:
        """What every rank holds alike: the agent, the model side and the counters."""
        return {
            "step": self.env_steps,
            "updates": self.updates,
            "agent": self.learner.state_dict(),
            "algorithm": self.model_side.state_dict(),
        }

    def state_dict(self, pool: bool = True) -> dict[str, Any]:
        """Everything a resumed run needs: :meth:`shared_state` and this rank's own part
        (:data:`OWN`: buffers, env copies, generators, the acting copy). ``pool=False``: all
        but the model pool (``checkpoint.pool=false``; a resume refills it, not bit-exact)."""
        buffers = {k: b for k, b in self.buffers().items() if pool or k != "model"}
        return {
            **self.shared_state(),
            "acting": self.acting.state_dict(),
            "buffers": {name: b.state_dict() for name, b in buffers.items()},
            "collector": self.collector.state_dict(),
            "rng": rng_state(self.gens),
        }

    def load_state_dict(self, state: dict[str, Any], own: dict[str, Any] | None = None) -> None:
        """Restore from :meth:`state_dict` (``own``: this rank's part when it is kept apart
        from the shared one; a ValueError when the state is another algorithm's)."""
        own = state if own is None else own
        self.learner.load_state_dict(state["agent"])
        self.acting.load_state_dict(own["acting"])
        saved = own["buffers"]
        for name, buffer in self.buffers().items():
            if name in saved or name != "model":  # (only the model pool may be left out)
                buffer.load_state_dict(saved[name])
        self.model_side.load_state_dict(state["algorithm"])
        # A checkpoint without the pool (checkpoint.pool=false): refilled at the next step.
        self._refill = "model" not in saved and self.model_side.pool_ready
        if self._refill:
            self.model_side.pool_ready = False  # (until then, batches from D_env alone)
        self.collector.load_state_dict(own["collector"])
        set_rng_state(own["rng"], self.gens)
        self.updates = state["updates"]
