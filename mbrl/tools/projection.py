"""A full run's time per phase, projected from a profiling window's rates and the run's own
schedule. The window is short and capped (a couple of model-fit epochs, a few hundred SAC
updates), so its shares say little about a real run, where the model fits grow with the data
and run until the holdout score stops improving; the projection scales each phase's measured
cost per unit of work by the work the whole run does.
"""

from __future__ import annotations

from dataclasses import dataclass

from mbrl.config import Config
from mbrl.runtime.eta import multiples
from mbrl.schedule import rollout_length, run_length


@dataclass
class Rates:
    """Seconds per unit of work, measured in the window (0 where the window did none)."""

    env_step: float
    sac_update: float
    fit_row_epoch: float  # model fit: per training row and epoch
    rollout_row: float  # per model transition generated
    rewarder_phase: float  # rewarder fit, per model phase (a fixed number of steps)
    eval_episode: float


def fit_epochs(cfg: Config) -> int:
    """Epochs each full model fit is assumed to take: ``profile.fit_epochs``, within the run's
    own cap (``model.max_epochs``)."""
    cap = cfg.model.max_epochs
    return cfg.profile.fit_epochs if cap is None else min(cap, cfg.profile.fit_epochs)


def train_rows(cfg: Config, env_steps: int) -> int:
    """Rows a model fit at ``env_steps`` trains on: the real buffer less the holdout."""
    n = min(env_steps, cfg.buffer.capacity)
    return n - max(1, min(int(n * cfg.model.holdout_ratio), cfg.model.max_holdout))


def project(cfg: Config, rates: Rates) -> dict[str, float]:
    """Seconds per phase of the whole run ``cfg`` describes (compile warm-up not included).
    Rollouts are counted at full length (no early terminations): an upper bound."""
    total, init = run_length(cfg), cfg.algorithm.init_steps
    out = {
        "env": total * rates.env_step,
        "sac": max(total - init, 0) * cfg.algorithm.updates_per_step * rates.sac_update,
        "eval": (multiples(cfg.eval.every, 1, total) + 1) * cfg.eval.episodes * rates.eval_episode,
    }
    if cfg.algorithm.name != "mbpo":
        return out
    freq, epochs, cap = cfg.mbpo.model_train_freq, fit_epochs(cfg), cfg.model.max_seconds
    first = -(-max(init, 1) // freq) * freq  # model phases: multiples of it from init on
    fit = rollout = 0.0
    phases = range(first, total, freq)
    for step in phases:
        seconds = train_rows(cfg, step) * epochs * rates.fit_row_epoch
        fit += seconds if cap is None else min(seconds, cap)
        rollout += cfg.rollout.batch_size * rollout_length(step, cfg) * rates.rollout_row
    out["model"], out["rollout"] = fit, rollout
    if cfg.rewarder.mode != "none":
        out["rewarder"] = len(phases) * rates.rewarder_phase
    return out
