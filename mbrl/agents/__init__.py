"""Agents (policy learners)."""

from mbrl.agents.acting import ActingPolicy, resolve_act_device
from mbrl.agents.sac import SAC

__all__ = ["SAC", "ActingPolicy", "resolve_act_device"]
