"""Agents (policy learners)."""

from mbrl.agents.acting import ActingPolicy, resolve_act_device
from mbrl.agents.sac import SAC
from mbrl.agents.updates import SACUpdates

__all__ = ["SAC", "ActingPolicy", "SACUpdates", "resolve_act_device"]
