"""S MBPO runs (seeds) in one process, stepped together: seeds batched in one process
(docs/scaling.md).

Each seed is a whole :class:`~mbrl.mbpo.MBPO` of its own (its env copies, D_env, model, model
pool, generators, counters), whose steps and model phases come at the same env steps as the
others'. What is batched is what dominates a step on a GPU, the small kernels: the G SAC
updates after each env step run for all seeds as one block
(:class:`~mbrl.agents.seed_batch.SeedUpdates`: one kernel launch per operation for S seeds,
one CUDA graph per block), and the model fits' minibatch steps for all seeds as one
(:class:`~mbrl.models.seed_fit.SeedFits`). Nothing is shared:
seed s computes what its solo run computes (its noise, batches and rollouts are drawn from
its own generators), up to float rounding in the batched matmuls (tests/test_batched_seeds.py)::

    while runs.env_steps < total_steps:
        steps = runs.step(timer)  # one Step per seed
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from mbrl.agents.seed_batch import SeedBatch, SeedUpdates
from mbrl.compiled import Compiled, tf32_matmuls
from mbrl.mbpo import MBPO, Step, Untimed
from mbrl.model_side import Phases, Status, quiet
from mbrl.models.seed_fit import SeedFits


class BatchedSeeds:
    """``runs``: one MBPO per seed, built alike but for ``cfg.seed`` (their agents' weights
    then live in one :class:`SeedBatch`)."""

    def __init__(self, runs: Sequence[MBPO]) -> None:
        _check_alike(runs)
        self.runs = list(runs)
        first = self.runs[0]
        self.speed = first.speed
        self.agents = SeedBatch([r.agent for r in self.runs], compile=self.speed.compile)
        self.sac_updates = SeedUpdates(
            self.agents,
            [r.model_side for r in self.runs],
            first.cfg.agent.batch_size,
            [r.gens["train"] for r in self.runs],
            graphs=self.speed.graphs,
            tf32=self.speed.tf32,
        )
        for s, run in enumerate(self.runs):  # a seed's run saves and loads its slot, and
            run.learner = self.agents.slot(s)  # reports the batched block as what ran
            run.sac_updates = self.sac_updates
        trainers = [r.model_side.model_trainer for r in self.runs]
        self.fits: SeedFits | None = None  # (model-free SAC: no model to fit)
        if all(t is not None for t in trainers):
            fitted = [t for t in trainers if t is not None]
            self.fits = SeedFits(fitted, compile=self.speed.compile, graphs=self.speed.graphs)
            for trainer in fitted:  # (what a seed reports as its fit steps' speed/model_fit)
                trainer.step = self.fits  # type: ignore[assignment]

    @property
    def env_steps(self) -> int:
        return self.runs[0].env_steps

    def step(self, timer: Phases | None = None, status: Status = quiet) -> list[Step]:
        """Each seed's model phase (when due) and env step, then every seed's G updates as
        one block. A model fit is not paused by a stop request here: the seeds stay in step."""
        timer = timer or Untimed()
        fitted = self._model_fits(timer, status)
        steps = [
            run.collect(timer, status=status, fitted=fit)
            for run, fit in zip(self.runs, fitted, strict=True)
        ]
        due = {run.updates_due(step.env_steps) for run, step in zip(self.runs, steps, strict=True)}
        if len(due) != 1:  # (alike configs keep them together: a bug if not)
            raise RuntimeError(f"the seeds are out of step: updates due {sorted(due)}")
        updates = due.pop()
        if updates:
            with timer.phase("sac"):
                metrics = self.sac_updates(updates)
            for s, (run, step) in enumerate(zip(self.runs, steps, strict=True)):
                step.updates, step.sac = updates, {k: v[s] for k, v in metrics.items()}
                run.updates += updates
        return steps

    def _model_fits(self, timer: Phases, status: Status) -> list[dict[str, Any] | None]:
        """When a model phase is due (for every seed alike), all seeds' model fits as one;
        each seed's fit metrics (its rewarder and rollouts then come in its own step)."""
        due = {r.model_side.model_phase_due(r.env_steps, r.collector.step_size) for r in self.runs}
        if len(due) != 1:  # (alike configs keep them together: a bug if not)
            raise RuntimeError(f"the seeds are out of step: model phase due {sorted(due)}")
        if not due.pop() or self.fits is None:
            return [None] * len(self.runs)
        with timer.phase("model"), tf32_matmuls(self.speed.tf32):
            status(f"model fit ({len(self.runs)} seeds)")
            data = [run.model_side.real.rows() for run in self.runs]
            return list(self.fits.fit(data, [r.gens["train"] for r in self.runs], status))

    def warm_up(self) -> dict[str, Compiled]:
        """Compile the batched SAC update and the batched model fit now, on copies."""
        with tf32_matmuls(self.speed.tf32):
            parts = {"SAC update": self.agents.warm_up()}
            if self.fits is not None:
                parts["model fit"] = self.fits.warm_up()
        return {name: c for name, c in parts.items() if c is not None}

    def state_dicts(self, pool: bool = True) -> list[dict[str, Any]]:
        """Seed s's state as its solo run's :meth:`MBPO.state_dict` (a solo run resumes it)."""
        return [run.state_dict(pool) for run in self.runs]

    def load_state_dicts(self, states: Sequence[dict[str, Any]]) -> None:
        """Restore each seed from a state of :meth:`state_dicts` (or of a solo run)."""
        if len(states) != len(self.runs):
            raise ValueError(f"{len(states)} states for {len(self.runs)} seeds: need one each")
        self.agents.load_state_dicts([state["agent"] for state in states])  # (all at once)
        for run, state in zip(self.runs, states, strict=True):
            run.load_state_dict(state)

    def close(self) -> None:
        for run in self.runs:
            run.close()


def _check_alike(runs: Sequence[MBPO]) -> None:
    """The seeds' configs may differ in ``seed`` (and the folder they resume) alone."""
    if not runs:
        raise ValueError("batched seeds need at least one run")
    base = dataclasses.replace(runs[0].cfg, seed=0, resume=None)
    for run in runs[1:]:
        if dataclasses.replace(run.cfg, seed=0, resume=None) != base:
            raise ValueError(
                f"seed {run.cfg.seed}'s config differs from seed {runs[0].cfg.seed}'s "
                "in more than the seed: batched seeds run one config"
            )
    seeds = [run.cfg.seed for run in runs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"batched seeds must differ: seeds {seeds}")
