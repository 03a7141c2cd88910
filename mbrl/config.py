"""Typed config schemas, validated once at start-up.

Hydra composes ``conf/``; :func:`validate` merges the result into these dataclasses (catching
unknown keys and wrong types) and checks every value's range, so a bad run fails before any
folder is written. Components receive only their own sub-config (``SAC(..., cfg.agent)``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from mbrl.envs.registry import ENVS

DEVICES = ("auto", "cpu", "cuda")
AMP_MODES = ("off", "bf16", "fp16")
ALGORITHMS = ("sac",)


class ConfigError(ValueError):
    """A config value that is not allowed; the message names the key, the value and the choices."""


@dataclass
class EnvConfig:
    name: str = "hopper"  # short name, one of mbrl.envs.ENVS
    max_episode_steps: int | None = None  # None: the env's own time limit


@dataclass
class AlgorithmConfig:
    name: str = "sac"  # the training loop
    learning_starts: int = 5000  # uniform-random actions for this many env steps before updates
    updates_per_step: int = 1  # gradient updates per env step once learning has started


@dataclass
class SACConfig:
    """Soft actor-critic (Haarnoja et al. 2018, v2 with automatic entropy tuning)."""

    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005  # target-network Polyak step
    batch_size: int = 256
    init_alpha: float = 1.0
    autotune: bool = True  # learn alpha towards target_entropy
    target_entropy: float | None = None  # None: -act_dim (SAC v2 heuristic)
    log_std_min: float = -5.0
    log_std_max: float = 2.0


@dataclass
class BufferConfig:
    capacity: int = 1_000_000  # real transitions kept (ring)


@dataclass
class EvalConfig:
    every: int = 5000  # env steps between evaluations (and checkpoints)
    episodes: int = 10  # deterministic episodes per evaluation


@dataclass
class LoggerConfig:
    tensorboard: bool = True  # write log/tb/ event files
    every: int = 1000  # env steps between metric lines (metrics.jsonl, text logs)
    progress: bool = True  # tqdm progress bar


@dataclass
class CheckpointConfig:
    snapshots: bool = True  # keep ckpt/iteration_<N>.pt at every evaluation
    buffer_in_snapshots: bool = True  # snapshots hold the buffers too (resumable, but larger)


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    agent: SACConfig = field(default_factory=SACConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    total_steps: int = 100_000  # env steps
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    amp: str = "off"  # off | bf16 | fp16 (autocast for the MLPs)
    threads: int = 1  # torch intra-op threads per process; 0 keeps torch's default
    resume: str | None = None  # a run folder to continue from its ckpt/last.pt


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; choose one of: {', '.join(allowed)}")


def _at_least(key: str, value: Any, low: float, what: str = "") -> None:
    if value is None or value < low:
        bound = what or f">= {low}"
        raise ConfigError(f"{key}={value!r} is not allowed; it must be {bound}")


def _check_ranges(c: Config) -> None:
    _choice("env", c.env.name, tuple(sorted(ENVS)))
    _choice("algorithm", c.algorithm.name, ALGORITHMS)
    _choice("device", c.device, DEVICES)
    _choice("amp", c.amp, AMP_MODES)
    if c.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            "device='cuda' is not allowed: torch sees no CUDA device; use auto or cpu"
        )
    _at_least("total_steps", c.total_steps, 1, "a positive number of env steps")
    _at_least("seed", c.seed, 0, "a non-negative integer")
    _at_least("threads", c.threads, 0, "0 (torch default) or a positive integer")
    _at_least("eval.every", c.eval.every, 1, "a positive number of env steps")
    _at_least("eval.episodes", c.eval.episodes, 1, "a positive integer")
    _at_least("logger.every", c.logger.every, 1, "a positive number of env steps")
    _at_least("buffer.capacity", c.buffer.capacity, 1, "a positive integer")
    _at_least("algorithm.learning_starts", c.algorithm.learning_starts, 0, ">= 0")
    _at_least("algorithm.updates_per_step", c.algorithm.updates_per_step, 0, ">= 0")
    if c.env.max_episode_steps is not None:
        _at_least("env.max_episode_steps", c.env.max_episode_steps, 1, "positive or null")
    _check_agent(c.agent)


def _check_agent(a: SACConfig) -> None:
    _at_least("agent.batch_size", a.batch_size, 1, "a positive integer")
    if not a.hidden_sizes or min(a.hidden_sizes) < 1:
        raise ConfigError(f"agent.hidden_sizes={a.hidden_sizes!r}: need one or more widths >= 1")
    for key in ("actor_lr", "critic_lr", "alpha_lr", "init_alpha"):
        if not getattr(a, key) > 0:
            raise ConfigError(f"agent.{key}={getattr(a, key)!r} is not allowed; it must be > 0")
    if not 0 <= a.gamma < 1:
        raise ConfigError(f"agent.gamma={a.gamma!r} is not allowed; it must be in [0, 1)")
    if not 0 < a.tau <= 1:
        raise ConfigError(f"agent.tau={a.tau!r} is not allowed; it must be in (0, 1]")
    if not a.log_std_min < a.log_std_max:
        raise ConfigError(
            f"agent.log_std_min={a.log_std_min} must be below agent.log_std_max={a.log_std_max}"
        )


def _check_resume(c: Config) -> None:
    if c.resume is None:
        return
    last = os.path.join(c.resume, "ckpt", "last.pt")
    if not os.path.isfile(last):
        raise ConfigError(
            f"resume={c.resume!r}: no checkpoint at {last}; "
            "pass a run folder that holds ckpt/last.pt"
        )


def validate(cfg: DictConfig | dict[str, Any]) -> Config:
    """Merge ``cfg`` (without its ``hydra`` node) into :class:`Config` and check every value."""
    raw = OmegaConf.create(cfg) if isinstance(cfg, dict) else cfg.copy()
    if "hydra" in raw:
        OmegaConf.set_struct(raw, False)
        raw.pop("hydra")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), raw)
        conf = OmegaConf.to_object(merged)
    except ConfigKeyError as err:
        bad = str(getattr(err, "full_key", "") or "")
        parent, _, _ = bad.rpartition(".")
        node = OmegaConf.select(OmegaConf.structured(Config), parent) if parent else None
        known = sorted(node.keys() if node is not None else Config.__dataclass_fields__)
        raise ConfigError(
            f"unknown config key {bad!r}; allowed here: {', '.join(map(str, known))}"
        ) from None
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        msg = str(err).splitlines()[0]
        raise ConfigError(f"bad config value{f' at {key}' if key else ''}: {msg}") from None
    assert isinstance(conf, Config)
    _check_ranges(conf)
    _check_resume(conf)
    return conf


def to_yaml(c: Config) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(c))
