"""The world models ``model=<name>`` can pick: :func:`register_model` adds one (and makes it
a hydra choice); :func:`build_model` builds the one a config names."""

from __future__ import annotations

import dataclasses
from typing import Any

from torch import nn

from mbrl.config import ConfigError, ModelConfig
from mbrl.registry import ConfigRegistry, target_class

MODELS = ConfigRegistry("model", "a model", ModelConfig)  # its config (register_model)
# What a model class states besides its methods (mbrl.models.protocol.WorldModel)
CLASS_ATTRIBUTES = {
    "config": "its config dataclass, a ModelConfig subclass",
    "scores": "the holdout scores it computes, e.g. ('mse',)",
    "shared": "the names of its parameters without a member dimension, usually ()",
}


def register_model(name: str, config: type[ModelConfig]) -> None:
    """Make ``model=<name>`` select ``config`` (its defaults, its ``_target_`` class)."""
    MODELS.add(name, config)


def model_config(name: str, **values: Any) -> ModelConfig:
    """The config ``model=<name>`` selects, with ``values`` set (a ConfigError for a name
    no model registered)."""
    return MODELS.config(name, **values)


def model_class(target: str) -> type[nn.Module]:
    """The class ``model._target_`` names; a ConfigError when it cannot be imported."""
    cls = target_class("model", target)
    config = getattr(cls, "config", None)
    has = {k: hasattr(cls, k) for k in CLASS_ATTRIBUTES}
    has["config"] = isinstance(config, type) and issubclass(config, ModelConfig)
    missing = [f"`{k}` ({what})" for k, what in CLASS_ATTRIBUTES.items() if not has[k]]
    if missing:
        raise ConfigError(f"model._target_={target!r} has no {', no '.join(missing)}")
    return cls


def config_class(target: str) -> type[ModelConfig]:
    """The config dataclass of the model ``target`` names (what ``model.*`` may hold)."""
    config: type[ModelConfig] = model_class(target).config  # type: ignore[attr-defined]
    return config


def build_model(dim: int, context_dim: int, cfg: ModelConfig) -> nn.Module:
    """A fresh model of ``cfg``'s class, for ``dim`` targets given ``context_dim`` inputs. A
    config with the common keys alone (``ModelConfig``) gets the class's defaults for its
    own keys."""
    cls = model_class(cfg._target_)
    own: type[ModelConfig] = cls.config  # type: ignore[attr-defined]
    if not isinstance(cfg, own):
        cfg = own(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    return cls(dim, context_dim, cfg)
