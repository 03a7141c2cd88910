"""Agents (policy learners)."""

from mbrl.agents.acting import ActingPolicy, resolve_act_device
from mbrl.agents.sac import SAC, agent_class
from mbrl.agents.updates import SACUpdates

__all__ = ["SAC", "ActingPolicy", "SACUpdates", "agent_class", "resolve_act_device"]
