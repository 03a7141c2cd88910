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
AMP_MODES = ("auto", "off", "bf16", "fp16")
ACT_DEVICES = ("auto", "cpu", "train")
ALGORITHMS = ("sac", "mbpo")
MODELS = ("flow", "gaussian")
REWARDER_MODES = ("none", "penalty", "filter")


class ConfigError(ValueError):
    """A config value that is not allowed; the message names the key, the value and the choices."""


@dataclass
class EnvConfig:
    name: str = "hopper"  # short name, one of mbrl.envs.ENVS
    max_episode_steps: int | None = None  # None: the env's own time limit


@dataclass
class AlgorithmConfig:
    name: str = "sac"  # the training loop: sac | mbpo
    # Model-free SAC only (MBPO reads mbpo.init_steps / mbpo.updates_per_step):
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
    # Where env actions are computed: train (the training device), cpu (a CPU copy of the
    # actor, refreshed every act_sync_every env steps), auto (cpu when training on CUDA).
    act_device: str = "auto"
    act_sync_every: int = 10
    # The update's gradients: analytic (written out by hand, fast) or autograd (for changing
    # the losses; also used under amp=fp16, whose loss scaling runs in autograd's backward).
    grads: str = "analytic"


@dataclass
class FlowModelConfig:
    """The flow world model's architecture (flows.EnsembleConditionalFlow)."""

    transform: str = "spline"  # spline (rational-quadratic) | affine coupling layers
    layers: int = 4  # coupling layers, a fixed permutation between them
    hidden: list[int] = field(default_factory=lambda: [128, 128])  # each coupling's conditioner
    bins: int = 8  # spline bins
    tail_bound: float = 4.0  # spline on [-B, B] (normalised units), identity outside
    embed_hidden: list[int] = field(default_factory=lambda: [200, 200])  # context network
    embed_dim: int = 128  # context features shared by the base layer and every coupling


# MBPO's construct_model (bnn.py): the L2 coefficient of each of its 4 hidden layers and output.
MBPO_L2 = [2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4]
SELECT_BY = ("nll", "mse")


@dataclass
class ModelConfig:
    """The dynamics ensemble p([ds, r] | s, a) and how it is fit (as MBPO does).

    Keys left null take the model kind's own default (see the properties below): the
    Gaussian ensemble is MBPO's, the flow keeps what suits a density model."""

    name: str = "flow"  # flow | gaussian (MBPO's probabilistic ensemble, the baseline)
    members: int = 7
    elites: int = 5  # members used for rollouts: best holdout score (select_by)
    hidden: list[int] = field(default_factory=lambda: [200, 200, 200, 200])  # gaussian MLP
    flow: FlowModelConfig = field(default_factory=FlowModelConfig)
    lr: float = 1e-3
    # Decoupled (AdamW) weight decay. null: 5e-5 for the flow, 0 for the Gaussian ensemble,
    # whose decay is MBPO's L2 term in the loss (l2).
    weight_decay: float | None = None
    # Gaussian only: per-layer L2 coefficients added to the loss. null: MBPO's MBPO_L2.
    l2: list[float] | None = None
    # Holdout score for early stopping and elites: mse (of the mean / the flow's mode, raw
    # target units) | nll. null: mse for the Gaussian (MBPO), nll for the flow.
    select_by: str | None = None
    # Standardise the targets [ds, r] too. null: yes for the flow, no for the Gaussian (MBPO
    # standardises inputs only).
    normalize_targets: bool | None = None
    batch_size: int = 256  # per member
    holdout_ratio: float = 0.2  # of the real data, capped at max_holdout rows (MBPO)
    max_holdout: int = 5000
    patience: int = 5  # epochs without a >improvement relative gain on any member
    improvement: float = 0.01
    max_epochs: int | None = None  # cap per fit (None: early stopping alone)
    max_seconds: float | None = None  # wall-clock cap per fit (makes runs machine-dependent)

    @property
    def gaussian(self) -> bool:
        return self.name == "gaussian"

    @property
    def decoupled_decay(self) -> float:
        if self.weight_decay is not None:
            return self.weight_decay
        return 0.0 if self.gaussian else 5e-5

    @property
    def l2_coefs(self) -> list[float]:
        if not self.gaussian:
            return []
        return list(MBPO_L2 if self.l2 is None else self.l2)

    @property
    def criterion(self) -> str:
        if self.select_by is not None:
            return self.select_by
        return "mse" if self.gaussian else "nll"

    @property
    def targets_normalized(self) -> bool:
        if self.normalize_targets is not None:
            return self.normalize_targets
        return not self.gaussian


@dataclass
class RolloutConfig:
    """Model rollouts; length schedule as MBPO: min_length until min_epoch, linear to
    max_length at max_epoch, then constant."""

    min_epoch: int = 20
    max_epoch: int = 150
    min_length: int = 1
    max_length: int = 15
    batch_size: int = 100_000  # start states per rollout phase
    retain_epochs: int = 1  # epochs of rollouts the model pool keeps


@dataclass
class MBPOConfig:
    init_steps: int = 5000  # uniform-random env steps before the first model fit
    model_train_freq: int = 250  # env steps between model fits (+ rollouts)
    updates_per_step: int = 20  # SAC updates per env step
    real_ratio: float = 0.05  # share of real transitions in each SAC batch
    epoch_length: int = 1000  # env steps per epoch (rollout schedule, pool size)


@dataclass
class RewarderConfig:
    """Coupled-flow rewarder (after CFIL): x = log p1 - log p2 ~ log(d_model / d_real)."""

    mode: str = "none"  # none | penalty (r - penalty * x) | filter (stop rows with x > threshold)
    penalty: float = 1.0
    threshold: float = 2.0
    transform: str = "spline"
    layers: int = 4
    hidden: list[int] = field(default_factory=lambda: [128, 128])
    bins: int = 8
    lr: float = 3e-4
    steps: int = 100  # gradient steps per model fit
    batch_size: int = 512  # real and model transitions each


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
    wandb: bool = False  # also log every metric to wandb (the optional extra `wandb`)
    wandb_project: str = "flowmbpo"
    wandb_entity: str | None = None
    wandb_group: str | None = None
    wandb_tags: list[str] = field(default_factory=list)
    wandb_name: str | None = None  # None: wandb's own run name
    wandb_mode: str | None = None  # online | offline | disabled; None: WANDB_MODE or online


@dataclass
class CheckpointConfig:
    snapshots: bool = True  # keep ckpt/iteration_<N>.pt at every evaluation
    buffer_in_snapshots: bool = True  # snapshots hold the buffers too (resumable, but larger)


@dataclass
class ProfileConfig:
    """Profiling mode (``profile=true``): a short window of the real loop, then a report."""

    enabled: bool = False
    updates: int = 300  # SAC updates in the window (after the random exploration steps)
    model_epochs: int = 2  # cap on the window's model fits
    eval_episodes: int = 1
    top_ops: int = 25  # rows of the operator table
    trace: bool = True  # write a torch.profiler trace (TensorBoard plugin / Perfetto)


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    agent: SACConfig = field(default_factory=SACConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    mbpo: MBPOConfig = field(default_factory=MBPOConfig)
    rewarder: RewarderConfig = field(default_factory=RewarderConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    total_steps: int = 100_000  # env steps
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    amp: str = "auto"  # auto (bf16 on a GPU that has it, else off) | off | bf16 | fp16
    compile: bool = False  # torch.compile the SAC losses and the model-fit step
    threads: int = 1  # torch intra-op threads per process; 0 keeps torch's default
    flush_denormal: bool = True  # denormal floats -> 0 on the CPU (x86 computes on them slowly)
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
    _check_model(c.model)
    _check_mbpo(c)
    _positive("profile", c.profile, "updates", "model_epochs", "eval_episodes", "top_ops")


def _positive(prefix: str, obj: object, *keys: str) -> None:
    for key in keys:
        _at_least(f"{prefix}.{key}", getattr(obj, key), 1, "a positive integer")


def _check_model(m: ModelConfig) -> None:
    _choice("model", m.name, MODELS)
    _choice("model.flow.transform", m.flow.transform, ("spline", "affine"))
    _positive("model", m, "members", "elites", "batch_size", "max_holdout")
    _positive("model.flow", m.flow, "bins", "embed_dim")
    _at_least("model.flow.layers", m.flow.layers, 0, ">= 0")
    _at_least("model.patience", m.patience, 0, ">= 0")
    if m.elites > m.members:
        raise ConfigError(
            f"model.elites={m.elites} is not allowed; it must be <= model.members={m.members}"
        )
    if not 0 < m.holdout_ratio < 1:
        raise ConfigError(
            f"model.holdout_ratio={m.holdout_ratio!r} is not allowed; it must be in (0, 1)"
        )
    if not m.lr > 0 or m.decoupled_decay < 0 or not m.flow.tail_bound > 0:
        raise ConfigError(
            f"model.lr={m.lr}, model.weight_decay={m.weight_decay}, model.flow.tail_bound="
            f"{m.flow.tail_bound}: need lr > 0, weight_decay >= 0, tail_bound > 0"
        )
    if m.select_by is not None:
        _choice("model.select_by", m.select_by, SELECT_BY)
    _check_l2(m)
    if m.max_epochs is not None:
        _at_least("model.max_epochs", m.max_epochs, 1, "positive or null")
    if m.max_seconds is not None and not m.max_seconds > 0:
        raise ConfigError(
            f"model.max_seconds={m.max_seconds!r} is not allowed; it must be > 0 or null"
        )


def _check_l2(m: ModelConfig) -> None:
    if not m.gaussian:
        if m.l2:
            raise ConfigError(
                f"model.l2={m.l2} is not allowed with model={m.name}: the L2 terms belong to "
                "the Gaussian ensemble; use model.weight_decay for the flow"
            )
        return
    layers, coefs = len(m.hidden) + 1, m.l2_coefs
    if len(coefs) != layers or min(coefs) < 0:
        given = "MBPO's 5 values (model.l2=null)" if m.l2 is None else f"model.l2={m.l2}"
        raise ConfigError(
            f"{given} does not fit model.hidden={m.hidden}: the Gaussian MLP has {layers} "
            f"layers, so model.l2 needs {layers} coefficients >= 0"
        )


def _check_mbpo(c: Config) -> None:
    r, m, w = c.rollout, c.mbpo, c.rewarder
    _positive("rollout", r, "min_length", "max_length", "batch_size", "retain_epochs")
    _positive("mbpo", m, "model_train_freq", "epoch_length")
    _positive("rewarder", w, "layers", "bins", "steps", "batch_size")
    _at_least("mbpo.init_steps", m.init_steps, 1, "a positive number of env steps")
    _at_least("mbpo.updates_per_step", m.updates_per_step, 0, ">= 0")
    _at_least("rollout.min_epoch", r.min_epoch, 0, ">= 0")
    if r.max_length < r.min_length or r.max_epoch < r.min_epoch:
        raise ConfigError(
            f"rollout schedule [{r.min_epoch}, {r.max_epoch}, {r.min_length}, {r.max_length}] is "
            "not allowed; need min_epoch <= max_epoch and min_length <= max_length"
        )
    if not 0 <= m.real_ratio <= 1:
        raise ConfigError(f"mbpo.real_ratio={m.real_ratio!r} is not allowed; it must be in [0, 1]")
    _choice("rewarder.mode", w.mode, REWARDER_MODES)
    _choice("rewarder.transform", w.transform, ("spline", "affine"))
    if not w.lr > 0 or w.penalty < 0:
        raise ConfigError(
            f"rewarder.lr={w.lr}, rewarder.penalty={w.penalty}: need lr > 0, penalty >= 0"
        )


def _check_agent(a: SACConfig) -> None:
    _at_least("agent.batch_size", a.batch_size, 1, "a positive integer")
    _choice("agent.act_device", a.act_device, ACT_DEVICES)
    _choice("agent.grads", a.grads, ("analytic", "autograd"))
    _at_least("agent.act_sync_every", a.act_sync_every, 1, "a positive number of env steps")
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


def load_config(path: str) -> Config:
    """A run's saved ``config.yaml``, validated."""
    raw = OmegaConf.load(path)
    if not isinstance(raw, DictConfig):
        raise ConfigError(f"{path} does not hold a config mapping")
    return validate(raw)
