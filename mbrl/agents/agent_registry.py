"""Which agents ``agent=<name>`` can pick, and their configs.

An agent is a class (:class:`~mbrl.agents.sac.SAC` or a subclass of it) and its config: an
:class:`~mbrl.config.AgentConfig` subclass whose ``_target_`` names the class, and that the
class names as its ``config``; both in one file, which registers the config with
:func:`register_agent` (``agent=sac``: mbrl/agents/sac.py). A file of yours is imported
through ``FLOWMBPO_PLUGINS`` (docs/model.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mbrl.config import AgentConfig, ConfigError
from mbrl.registry import ConfigRegistry, target_class

AGENTS = ConfigRegistry("agent", "an agent", AgentConfig)  # its config (register_agent)


def register_agent(name: str, config: type[AgentConfig]) -> None:
    """Make ``agent=<name>`` select ``config`` (its defaults, its ``_target_`` class)."""
    AGENTS.add(name, config)


def agent_config(name: str, **values: Any) -> AgentConfig:
    """The config ``agent=<name>`` selects, with ``values`` set (a ConfigError for a name
    no agent registered)."""
    return AGENTS.config(name, **values)


def agent_name(target: str) -> str:
    """The name ``agent=<name>`` gives the class ``target`` names (its class name if none)."""
    names = [name for name, config in AGENTS.items() if config._target_ == target]
    return names[0] if names else target.rpartition(".")[2]


def agent_class(target: str) -> type[Any]:
    """The class ``agent._target_`` names (:class:`~mbrl.agents.sac.SAC` or a subclass of
    it); a ConfigError when it cannot be imported or has no ``config`` (an AgentConfig
    subclass: its keys)."""
    cls = target_class("agent", target)
    config = getattr(cls, "config", None)
    if not (isinstance(config, type) and issubclass(config, AgentConfig)):
        raise ConfigError(
            f"agent._target_={target!r} has no `config` (an AgentConfig subclass, its keys)"
        )
    return cls


def config_class(target: str) -> type[AgentConfig]:
    """The config dataclass of the agent ``target`` names (what ``agent.*`` may hold)."""
    config: type[AgentConfig] = agent_class(target).config
    return config


def build_agent(obs_dim: int, act_dim: int, cfg: AgentConfig, **kwargs: Any) -> Any:
    """A fresh agent of ``cfg``'s class, built as ``cls(obs_dim, act_dim, cfg, **kwargs)``
    (``kwargs``: ``device``, ``amp``, ``compile``, by name, as SAC takes them). A config with
    the loop's keys alone (``AgentConfig``) gets the class's defaults for its own keys."""
    cls = agent_class(cfg._target_)
    if not isinstance(cfg, cls.config):
        loop_keys = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(AgentConfig)}
        cfg = cls.config(**loop_keys)
    return cls(obs_dim, act_dim, cfg, **kwargs)
