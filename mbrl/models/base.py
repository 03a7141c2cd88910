"""What a world model is to FlowMBPO, and how one is found from the config.

A model is an ensemble of E members that predicts the targets [s' - s, r] from normalised
inputs (s, a), in the model's units (targets standardised when ``model.normalize_targets``).
It is one ``nn.Module`` class, built as ``cls(dim, context_dim, cfg)``, with its config: a
:class:`~mbrl.config.ModelConfig` subclass whose ``_target_`` names the class, registered
with :func:`register_model` (which makes ``model=<name>`` a choice on the command line). The
model fit, the rollouts and the rewarder use only the methods of :class:`WorldModel`; nothing
outside a model's own file knows which model it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch
from hydra.core.config_store import ConfigStore
from hydra.utils import get_class
from torch import Tensor, nn

if TYPE_CHECKING:
    from mbrl.config import ModelConfig
# (mbrl.config is imported where it is used: its default model config imports the flow's
# file, which imports this one.)

# Holdout-score functions get this: model-unit targets -> raw target units.
ToRaw = Callable[[Tensor], Tensor]


class WorldModel(Protocol):
    """The methods a model provides. ``x`` holds normalised inputs, [B, C] (shared by the
    members) or [E', B, C]; ``y`` targets in model units, [E', B, D] or [B, D]."""

    # The holdout scores :meth:`score` computes (``model.select_by`` picks one of them);
    # "nll" is taken to be a negative log-likelihood (logged in raw target units).
    scores: ClassVar[tuple[str, ...]]

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
        """The training loss on a minibatch ``x`` [E, b, C], ``y`` [E, b, D], and a
        per-member train metric [E]; ``weight`` [E, b]: 1 for a row, 0 for padding (means
        over the rows of weight 1), or None (all rows)."""
        ...

    def score(self, name: str, x: Tensor, y: Tensor, raw: ToRaw) -> Tensor:
        """Holdout score ``name`` per member and row [E, B] (lower is better)."""
        ...

    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        """Next-step targets for rollouts: member ``members[i]`` on ``x[i]`` [E', B, C] ->
        [E', B, D] (a draw for a stochastic model, the prediction for a deterministic one)."""
        ...


MODELS: dict[str, type[ModelConfig]] = {}  # model=<name> -> its config (register_model)


def register_model(name: str, config: type[ModelConfig]) -> None:
    """Make ``model=<name>`` select ``config`` (its defaults, its ``_target_`` class)."""
    MODELS[name] = config
    ConfigStore.instance().store(group="model", name=name, node=config)


def model_config(name: str, **values: Any) -> ModelConfig:
    """The config ``model=<name>`` selects, with ``values`` set (a ConfigError for a name
    no model registered)."""
    from mbrl.config import ConfigError

    if name not in MODELS:
        raise ConfigError(f"model={name!r} is not a model; choose one of: {', '.join(MODELS)}")
    return MODELS[name](**values)


def model_class(target: str) -> type[nn.Module]:
    """The class ``model._target_`` names; a ConfigError when it cannot be imported."""
    from mbrl.config import ConfigError, ModelConfig

    try:
        cls = get_class(target)
    except Exception as err:  # (hydra wraps import errors of every kind)
        raise ConfigError(f"model._target_={target!r} cannot be imported: {err}") from None
    config = getattr(cls, "config", None)
    if not (isinstance(config, type) and issubclass(config, ModelConfig)):
        raise ConfigError(
            f"model._target_={target!r} has no `config` (a ModelConfig subclass, its keys)"
        )
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


# --- shared by the density models (the flow, the Gaussian) ---------------------------------


def weighted_mean(values: Tensor, weight: Tensor | None) -> Tensor:
    """Mean over dim 1 of ``values`` [E, b], over the rows of weight 1 (all rows: None)."""
    if weight is None:
        return values.mean(dim=1)
    return (values * weight).sum(dim=1) / weight.sum(dim=1)


def density_score(name: str, dist: Any, y: Tensor, raw: ToRaw) -> Tensor:
    """``nll`` (model units) or ``mse`` of the mode (raw units, mean over dims: bnn.py's
    ``mse_loss``) of a member distribution ``dist``, per member and row."""
    if name == "nll":
        out: Tensor = -dist.log_prob(y)
        return out
    return (raw(dist.mode.float()) - raw(y)).square().mean(-1)
