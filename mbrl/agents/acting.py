"""Where env actions are computed: on the training device, or on a CPU copy of the actor.

On a GPU, acting on the training device reads one action back per env step, which waits for
every update queued before it. A CPU copy of the actor, refreshed every ``sync_every`` env
steps, acts without touching the GPU in between, so the host steps the env while the GPU runs
the queued updates. On a CPU the two are the same thing and no copy is made.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

from mbrl.agents.sac import SAC, Actor


def resolve_act_device(name: str, train_device: torch.device) -> torch.device:
    """``auto`` -> cpu when training on CUDA, else the training device; ``train`` -> it."""
    if name == "train" or (name == "auto" and train_device.type == "cpu"):
        return train_device
    return torch.device("cpu")


class ActingPolicy:
    def __init__(
        self, agent: SAC, device: torch.device, sync_every: int, separate: bool | None = None
    ) -> None:
        """``separate``: keep a copy of the actor (default: when ``device`` is not the
        agent's device; True on one device is for tests of the refresh schedule)."""
        self.agent, self.device, self.sync_every = agent, device, sync_every
        self.copy: Actor | None = None
        if separate or (separate is None and device != agent.device):
            self.copy = copy.deepcopy(agent.actor).to(device).requires_grad_(False)
        self._since_sync = 0

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] on ``self.device`` -> actions [B, act_dim] on ``self.device``."""
        if self.copy is None:
            return self.agent.act(obs, deterministic, generator)
        return self.copy.act(obs, deterministic, generator)

    def step(self, env_steps: int = 1) -> None:
        """Called after each (vector) step of ``env_steps`` env steps: refresh the copy once
        ``sync_every`` env steps have passed."""
        self._since_sync += env_steps
        if self._since_sync >= self.sync_every:
            self.sync()

    def sync(self) -> None:
        """Copy the training actor's weights now (a device-to-host copy on a GPU)."""
        self._since_sync = 0
        if self.copy is not None:
            with torch.no_grad():
                for dst, src in zip(
                    self.copy.parameters(), self.agent.actor.parameters(), strict=True
                ):
                    dst.copy_(src)

    def state_dict(self) -> dict[str, Any]:
        # The (possibly stale) copy is part of the run's state: a resumed run acts as the
        # uninterrupted one would.
        weights = None if self.copy is None else self.copy.state_dict()
        return {"since_sync": self._since_sync, "weights": weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._since_sync = state["since_sync"]
        if self.copy is not None and state["weights"] is not None:
            self.copy.load_state_dict(state["weights"])
        elif self.copy is not None:
            self.sync()
