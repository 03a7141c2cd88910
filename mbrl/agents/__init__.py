"""Agents (policy learners)."""

from mbrl.agents.sac import SAC

__all__ = ["SAC"]
