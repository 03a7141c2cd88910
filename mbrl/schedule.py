"""MBPO's schedule in env steps: its epochs, the rollout length, the model pool's size, and when
a periodic event (a model phase, an evaluation) is due."""

from __future__ import annotations

from mbrl.config import Config


def crossed(env_steps: int, every: int, step_size: int) -> bool:
    """Whether the last step, of ``step_size`` env steps, reached a multiple of ``every``:
    ``env_steps % every == 0`` for one env, the first step at or past the multiple for N."""
    return env_steps // every > (env_steps - step_size) // every


def run_length(cfg: Config) -> int:
    """Env steps a run takes: ``total_steps``, rounded up to whole steps of the env copies."""
    n = cfg.env.num_envs
    return -(-cfg.total_steps // n) * n


def sac_updates(cfg: Config, env_steps: int = 0) -> int:
    """SAC updates from ``env_steps`` to the run's end: G per env step after the random ones."""
    g = cfg.algorithm.updates_per_step
    return max(run_length(cfg) - max(env_steps, cfg.algorithm.init_steps), 0) * g


def mbpo_epoch(env_steps: int, cfg: Config) -> int:
    """MBPO's epoch counter: epochs of ``epoch_length`` env steps *after* the initial random
    exploration (mbpo.py's ``_epoch`` starts at 0 once ``init_steps`` are collected)."""
    return max(env_steps - cfg.algorithm.init_steps, 0) // cfg.mbpo.epoch_length


def rollout_length(env_steps: int, cfg: Config) -> int:
    """MBPO's ``_set_rollout_length``: min_length up to min_epoch, then linear to max_length
    at max_epoch, then constant. (A schedule with min_epoch == max_epoch jumps there.)"""
    r, epoch = cfg.rollout, mbpo_epoch(env_steps, cfg)
    if epoch <= r.min_epoch:
        return r.min_length
    dx = 1.0 if r.max_epoch == r.min_epoch else (epoch - r.min_epoch) / (r.max_epoch - r.min_epoch)
    return int(min(dx, 1.0) * (r.max_length - r.min_length) + r.min_length)


def first_model_phase(cfg: Config) -> int:
    """The env step of the first model phase: the first multiple of ``model_train_freq`` from
    ``init_steps`` on (and past step 0: the buffer is empty then), as ``model_phase_due``."""
    freq = cfg.mbpo.model_train_freq
    return -(-max(cfg.algorithm.init_steps, 1) // freq) * freq


def model_phase_steps(cfg: Config, start: int = 0) -> range:
    """The env steps of the model phases from ``start`` on, up to the run's end (one env)."""
    freq = cfg.mbpo.model_train_freq
    return range(max(first_model_phase(cfg), -(-start // freq) * freq), run_length(cfg), freq)


def model_pool_size(cfg: Config, length: int) -> int:
    """MBPO's ``_reallocate_model_pool``: retain_epochs epochs of rollouts of ``length``."""
    m = cfg.mbpo
    rollouts_per_epoch = cfg.rollout.batch_size * m.epoch_length / m.model_train_freq
    return cfg.rollout.retain_epochs * int(length * rollouts_per_epoch)


def pool_capacity(cfg: Config) -> int:
    """The pool is allocated once, at the size for the schedule's longest rollouts; SAC
    samples only from the window ``model_pool_size(cfg, current length)`` of newest rows."""
    return model_pool_size(cfg, max(cfg.rollout.min_length, cfg.rollout.max_length))
