"""Where env actions are computed: on the training device, or on a CPU copy of the actor.

On a GPU, acting on the training device reads one action back per env step, which waits for
every update queued before it. A CPU copy of the actor, refreshed every ``sync_every`` env
steps, acts without touching the GPU in between, so the host steps the env while the GPU runs
the queued updates. The refresh itself does not wait either: the weights are copied
(non-blocking) into pinned host memory behind the queued work, and swapped into the copy at
the next action, by which time the GPU is already working on later updates. On a CPU the two
are the same thing and no copy is made.
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
        self._staged: list[Tensor] = []  # pinned host copies of the weights, in flight
        self._ready: torch.cuda.Event | None = None  # set while a staged copy is in flight
        if separate or (separate is None and device != agent.device):
            self.copy = copy.deepcopy(agent.actor).to(device).requires_grad_(False)
            if agent.device.type == "cuda" and device.type == "cpu":
                self._staged = [  # (allocated pinned, not allocated and then copied)
                    torch.empty(p.shape, dtype=p.dtype, pin_memory=True)
                    for p in self.copy.parameters()
                ]
        self._since_sync = 0

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] on ``self.device`` -> actions [B, act_dim] on ``self.device``."""
        if self.copy is None:
            return self.agent.act(obs, deterministic, generator)
        self._swap_in()
        return self.copy.act(obs, deterministic, generator)

    def step(self, env_steps: int = 1) -> None:
        """Called after each (vector) step of ``env_steps`` env steps: refresh the copy once
        ``sync_every`` env steps have passed."""
        self._since_sync += env_steps
        if self._since_sync >= self.sync_every:
            self.sync()

    @torch.no_grad()
    def sync(self) -> None:
        """Refresh the copy with the training actor's weights as of now (the work queued so
        far): at once on one device, at the next action from a GPU."""
        self._since_sync = 0
        if self.copy is None:
            return
        sources = list(self.agent.actor.parameters())
        if not self._staged:
            for param, src in zip(self.copy.parameters(), sources, strict=True):
                param.copy_(src)
            return
        for staged, src in zip(self._staged, sources, strict=True):
            staged.copy_(src, non_blocking=True)
        self._ready = torch.cuda.Event()
        self._ready.record()

    @torch.no_grad()
    def _swap_in(self) -> None:
        """Put the staged weights into the copy, once their transfer is done."""
        if self._ready is None or self.copy is None:
            return
        self._ready.synchronize()  # the transfer only, queued behind earlier updates
        for param, staged in zip(self.copy.parameters(), self._staged, strict=True):
            param.copy_(staged)
        self._ready = None

    def state_dict(self) -> dict[str, Any]:
        # The (possibly stale) copy is part of the run's state: a resumed run acts as the
        # uninterrupted one would.
        self._swap_in()  # (a refresh in flight is what the next action would use)
        weights = None if self.copy is None else self.copy.state_dict()
        return {"since_sync": self._since_sync, "weights": weights}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._since_sync = state["since_sync"]
        self._ready = None
        if self.copy is not None and state["weights"] is not None:
            self.copy.load_state_dict(state["weights"])
        elif self.copy is not None:
            self.sync()
