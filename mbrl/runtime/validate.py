"""Checks every config value once, at start-up, so that a bad run fails before any folder is
written: :func:`validate` merges hydra's result into :class:`mbrl.config.Config` (catching
unknown keys and wrong types) and checks each value's range; a :class:`ConfigError` names the
key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import difflib
import os
from typing import Any, NoReturn

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from mbrl.agents.agent_registry import config_class as agent_config_class
from mbrl.config import (
    ACT_DEVICES,
    ALGORITHMS,
    AMP_MODES,
    COMPILE_MODES,
    DEVICES,
    REAL_DATA,
    REWARDER_MODES,
    VECTOR_MODES,
    WANDB_MODES,
    AgentConfig,
    Config,
    ConfigError,
    ModelConfig,
)
from mbrl.envs.specs import ENVS
from mbrl.models.model_registry import MODELS, config_class, model_class
from mbrl.plugins import import_saved

# Keys an older config left null for "the model's default" (the model's config sets them now).
LEGACY_NULLS = ("weight_decay", "select_by", "normalize_targets")


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; choose one of: {', '.join(allowed)}")


def _must(key: str, value: Any, ok: bool, what: str) -> None:
    """Unless ``ok``: a ConfigError naming the key, its value and what it must be."""
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed; it must be {what}")


def _at_least(key: str, value: Any, low: float, what: str) -> None:
    _must(key, value, not (value is None or value < low), what)


def _check_ranges(c: Config) -> None:
    _choice("env", c.env.name, tuple(sorted(ENVS)))
    versions = tuple(v for v, _ in ENVS[c.env.name].versions)
    if c.env.version is not None and c.env.version not in versions:
        raise ConfigError(
            f"env.version={c.env.version!r} is not allowed for env={c.env.name}; "
            f"its versions are: {', '.join(versions)} (null: {versions[0]})"
        )
    _choice("algorithm", c.algorithm.name, ALGORITHMS)
    _choice("device", c.device, DEVICES)
    _choice("amp", c.amp, AMP_MODES)
    c.compile = str(c.compile).lower()  # (hydra reads compile=true as a bool)
    _choice("compile", c.compile, COMPILE_MODES)
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
    _at_least("algorithm.init_steps", c.algorithm.init_steps, 0, ">= 0")
    _at_least("algorithm.updates_per_step", c.algorithm.updates_per_step, 0, ">= 0")
    _at_least("env.num_envs", c.env.num_envs, 1, "a positive number of env copies")
    _choice("env.vector", c.env.vector, VECTOR_MODES)
    _choice("eval.vector", c.eval.vector, VECTOR_MODES)
    _optional("env.max_episode_steps", c.env.max_episode_steps)
    if c.logger.wandb_mode is not None:  # (wandb would warn and log nothing)
        _choice("logger.wandb_mode", c.logger.wandb_mode, WANDB_MODES)
    if c.max_minutes is not None and not c.max_minutes > 0:
        raise ConfigError(f"max_minutes={c.max_minutes:g} is not allowed; it must be > 0 or null")
    _check_batch(c)
    _check_agent(c.agent)
    _check_model(c.model)
    _check_mbpo(c)
    _positive("profile", c.profile, "updates", "eval_episodes", "top_ops")
    _optional("profile.model_epochs", c.profile.model_epochs)


def _check_batch(c: Config) -> None:
    """batch_seeds and batch_dirs (mbrl.seed_trainer): S seeds, S - 1 folders or none."""
    _at_least("batch_seeds", c.batch_seeds, 1, "a positive number of seeds in this process")
    if c.batch_dirs and len(c.batch_dirs) != c.batch_seeds - 1:
        raise ConfigError(
            f"batch_dirs has {len(c.batch_dirs)} folders; with batch_seeds={c.batch_seeds} "
            f"give {c.batch_seeds - 1} (the other seeds' run folders) or none (beside this one)"
        )
    if c.batch_seeds > 1 and c.profile.enabled:
        raise ConfigError("batch_seeds > 1 with profile.enabled=true: profile one seed's run")


def _positive(prefix: str, obj: object, *keys: str) -> None:
    for key in keys:
        _at_least(f"{prefix}.{key}", getattr(obj, key), 1, "a positive integer")


def _optional(key: str, value: int | None) -> None:
    _must(key, value, value is None or value >= 1, "positive or null")


def _check_model(m: ModelConfig) -> None:
    _positive("model", m, "members", "elites", "batch_size", "max_holdout")
    _at_least("model.patience", m.patience, 0, ">= 0")
    _must("model.elites", m.elites, m.elites <= m.members, f"<= model.members={m.members}")
    _must("model.holdout_ratio", m.holdout_ratio, 0 < m.holdout_ratio < 1, "in (0, 1)")
    _must("model.lr", m.lr, m.lr > 0, "> 0")
    _must("model.weight_decay", m.weight_decay, not m.weight_decay < 0, ">= 0")
    scores: tuple[str, ...] = model_class(m._target_).scores  # type: ignore[attr-defined]
    if m.select_by not in scores:
        raise ConfigError(
            f"model.select_by={m.select_by!r} is not allowed with model={m.name}; its holdout "
            f"scores are: {', '.join(scores)}"
        )
    problem = m.check()  # the model's own keys
    if problem:
        raise ConfigError(problem)
    _optional("model.max_epochs", m.max_epochs)
    seconds = m.max_seconds
    _must("model.max_seconds", seconds, seconds is None or seconds > 0, "> 0 or null")


def _check_mbpo(c: Config) -> None:
    r, m, w = c.rollout, c.mbpo, c.rewarder
    _positive("rollout", r, "min_length", "max_length", "batch_size", "retain_epochs")
    _positive("mbpo", m, "model_train_freq", "epoch_length")
    _positive("rewarder", w, "steps", "batch_size")
    _positive("rewarder.flow", w.flow, "layers", "bins")
    if c.algorithm.name == "mbpo":  # the first model fit needs real data
        _at_least("algorithm.init_steps", c.algorithm.init_steps, 1, "> 0 with algorithm=mbpo")
    _at_least("rollout.min_epoch", r.min_epoch, 0, ">= 0")
    for what, low, high in (
        ("length", r.min_length, r.max_length),
        ("epoch", r.min_epoch, r.max_epoch),
    ):
        if high < low:  # (MBPO's schedule goes from min_length at min_epoch to max_length)
            raise ConfigError(
                f"rollout.max_{what}={high} is below rollout.min_{what}={low}; the rollout "
                f"length goes from min_length at min_epoch to max_length at max_epoch, and "
                f"env={c.env.name}'s MBPO settings set the schedule (docs/config.md, settings per "
                f"env): set both, e.g. rollout.min_{what}={high} rollout.max_{what}={high}"
            )
    _must("mbpo.real_ratio", m.real_ratio, 0 <= m.real_ratio <= 1, "in [0, 1]")
    _choice("rewarder.mode", w.mode, REWARDER_MODES)
    _choice("mbpo.real_data", m.real_data, REAL_DATA)
    _choice("rewarder.flow.transform", w.flow.transform, ("spline", "affine"))
    _must("rewarder.lr", w.lr, w.lr > 0, "> 0")
    _must("rewarder.penalty", w.penalty, not w.penalty < 0, ">= 0")


def _check_agent(a: AgentConfig) -> None:
    _at_least("agent.batch_size", a.batch_size, 1, "a positive integer")
    _choice("agent.act_device", a.act_device, ACT_DEVICES)
    _at_least("agent.act_sync_every", a.act_sync_every, 1, "a positive number of env steps")
    problem = a.check()  # the agent's own keys
    if problem:
        raise ConfigError(problem)


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
    """Merge ``cfg`` (without its ``hydra`` node) into :class:`Config`, its ``model`` and
    ``agent`` nodes into the configs of the classes their ``_target_`` names, and check
    every value."""
    # (As plain values: a node typed as another model's or agent's config would not merge.)
    plain = cfg if isinstance(cfg, dict) else OmegaConf.to_container(cfg, resolve=False)
    raw = OmegaConf.create(plain)
    if not isinstance(raw, DictConfig):
        raise ConfigError(f"a config is a mapping of keys, not {type(plain).__name__}")
    raw.pop("hydra", None)
    _upgrade_model(raw)
    profile = raw.get("profile")
    if isinstance(profile, DictConfig):  # (a config saved when epochs per fit were assumed)
        profile.pop("fit_epochs", None)
    model = OmegaConf.select(raw, "model._target_", default=None)
    schema = schema_for(model, OmegaConf.select(raw, "agent._target_", default=None))
    # A key added with hydra's `+key=value` passes hydra and the merge below unnoticed.
    _refuse_unknown_keys(raw, schema, schema)
    try:
        merged = OmegaConf.merge(schema, raw)
        conf = OmegaConf.to_object(merged)
    except ConfigKeyError as err:
        _refuse_key(str(getattr(err, "full_key", "") or ""), schema)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None)
        msg = str(err).splitlines()[0]
        raise ConfigError(f"bad config value{f' at {key}' if key else ''}: {msg}") from None
    assert isinstance(conf, Config)
    _check_ranges(conf)
    _check_resume(conf)
    return conf


def _upgrade_model(raw: DictConfig) -> None:
    """A config saved before models named their class (``model.name`` only, every model's
    keys in one node, null for "the model's default"): its model's ``_target_``, and only the
    keys that model's config has (the others were the other model's defaults)."""
    model = raw.get("model")
    if not isinstance(model, DictConfig) or "_target_" in model or model.get("name") not in MODELS:
        return
    config = MODELS[str(model.name)]
    keys = {f.name for f in dataclasses.fields(config)}
    for key in [str(k) for k in model]:
        if key not in keys or (model[key] is None and key in LEGACY_NULLS):
            model.pop(key)
    model._target_ = config._target_


def schema_for(model_target: str | None, agent_target: str | None = None) -> DictConfig:
    """:class:`Config` with, as its ``model`` and ``agent`` nodes, the configs of the classes
    ``model_target`` and ``agent_target`` name (None: the default model's, agent's)."""
    schema = OmegaConf.structured(Config)
    schema.model = OmegaConf.structured(config_class(model_target or ModelConfig._target_))
    schema.agent = OmegaConf.structured(agent_config_class(agent_target or AgentConfig._target_))
    return schema


def _refuse_unknown_keys(
    raw: DictConfig, schema: DictConfig, root: DictConfig, prefix: str = ""
) -> None:
    """Every key of ``raw`` must be one of the schema's, at any depth."""
    for key in map(str, raw):
        if key not in schema:
            _refuse_key(f"{prefix}{key}", root)
        node, known = raw._get_node(key), schema._get_node(key)  # (no interpolation resolved)
        if isinstance(known, DictConfig) and OmegaConf.get_type(known) is dict:
            continue  # (a mapping of any keys: `plugins`)
        if isinstance(node, DictConfig) and isinstance(known, DictConfig):
            _refuse_unknown_keys(node, known, root, f"{prefix}{key}.")


def check_key(path: str, root: DictConfig) -> Any:
    """The node of ``root`` (a :func:`schema_for`) at ``path`` (``a.b.c``); a ConfigError
    names the closest key when ``path`` is not one."""
    node: Any = root
    for i, part in enumerate(path.split(".")):
        if not isinstance(node, DictConfig) or part not in node:
            _refuse_key(".".join(path.split(".")[: i + 1]), root)
        node = node._get_node(part)
    return node


def _refuse_key(path: str, root: DictConfig) -> NoReturn:
    """A ConfigError for an unknown key: the closest known one, and what is allowed there."""
    parent, _, leaf = path.rpartition(".")
    node = OmegaConf.select(root, parent) if parent else root
    if not isinstance(node, DictConfig):
        node = root
    known = sorted(map(str, node.keys()))
    close = difflib.get_close_matches(leaf, known, n=1)
    hint = f"did you mean {parent + '.' if parent else ''}{close[0]}? " if close else ""
    if not close:  # (the right key under another node: algorithm.real_ratio for mbpo.real_ratio)
        paths = _paths(root)
        names = {p.rpartition(".")[2]: p for p in reversed(paths)}
        found = [p for p in paths if p.rpartition(".")[2] == leaf] or [
            names[n] for n in difflib.get_close_matches(leaf, list(names), n=1, cutoff=0.85)
        ]
        hint = f"did you mean {' or '.join(found[:2])}? " if found else ""
    raise ConfigError(
        f"unknown config key {path!r} (with or without hydra's '+'); {hint}"
        f"allowed here: {', '.join(known)}"
    )


def _paths(node: DictConfig, prefix: str = "") -> list[str]:
    """Every key of ``node`` and of the nodes under it, dotted (``mbpo.real_ratio``)."""
    out = []
    for key in map(str, node.keys()):
        out.append(prefix + key)
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            out += _paths(child, f"{prefix}{key}.")
    return out


def to_yaml(c: Config) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(c))


def load_config(path: str, read_here: bool = False) -> Config:
    """A run's saved ``config.yaml``, validated. ``read_here``: the run is read (evaluated,
    probed) on this machine, not resumed: a run trained on a GPU is read on the CPU where
    torch sees none."""
    raw = OmegaConf.load(path)
    if not isinstance(raw, DictConfig):
        raise ConfigError(f"{path} does not hold a config mapping")
    import_saved(raw, "")  # the run's plug-in modules (its model, agent or env)
    if read_here and raw.get("device") == "cuda" and not torch.cuda.is_available():
        raw.device = "cpu"
    return validate(raw)
