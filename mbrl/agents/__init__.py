"""Agents (policy learners). Importing this package registers the built-in agent
(``agent=sac``); an agent of your own registers itself with :func:`register_agent`
(docs/model.md)."""

from mbrl.agents.acting import ActingPolicy, resolve_act_device
from mbrl.agents.agent_registry import (
    AGENTS,
    agent_class,
    agent_config,
    build_agent,
    register_agent,
)
from mbrl.agents.sac import SAC, SACConfig
from mbrl.agents.updates import SACUpdates

__all__ = [
    "AGENTS",
    "SAC",
    "ActingPolicy",
    "SACConfig",
    "SACUpdates",
    "agent_class",
    "agent_config",
    "build_agent",
    "register_agent",
    "resolve_act_device",
]
