"""A replay buffer of preallocated tensors on the training device.

Rows are written by index arithmetic into a ring (oldest rows overwritten first) and sampled
with an explicit ``torch.Generator``, so a run is reproducible and resumable. The write pointer
and the fill level live on the device too: :meth:`ReplayBuffer.add` with a ``mask`` (model
rollouts, whose rows stop at different steps) writes only the kept rows without ever asking the
host how many there were. The same class is the real buffer and MBPO's model pool.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

Fields = dict[str, tuple[tuple[int, ...], torch.dtype]]


def transition_fields(obs_dim: int, act_dim: int) -> Fields:
    """Field layout of a transition: per-row shape and dtype."""
    return {
        "obs": ((obs_dim,), torch.float32),
        "act": ((act_dim,), torch.float32),
        "rew": ((), torch.float32),
        "next_obs": ((obs_dim,), torch.float32),
        "terminated": ((), torch.bool),
        "truncated": ((), torch.bool),
    }


class ReplayBuffer:
    """Ring buffer of named tensor fields, all ``[capacity, *shape]`` on one device."""

    def __init__(self, capacity: int, fields: Fields, device: torch.device | str = "cpu") -> None:
        if capacity <= 0:
            raise ValueError(f"buffer capacity must be a positive integer, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        # One spare row at index `capacity`: masked-out rows of a masked add land there.
        self.data: dict[str, Tensor] = {
            name: torch.zeros((capacity + 1, *shape), dtype=dtype, device=self.device)
            for name, (shape, dtype) in fields.items()
        }
        self._pushed_at = torch.zeros(capacity + 1, dtype=torch.long, device=self.device)
        self._ptr = torch.zeros((), dtype=torch.long, device=self.device)  # next row to write
        self._size = torch.zeros((), dtype=torch.long, device=self.device)  # rows holding data
        self._pushed = torch.zeros((), dtype=torch.long, device=self.device)  # rows ever written
        self._offered = 0  # rows ever offered (host side: an upper bound of what was written)
        self.sampled_out = 0
        self._last_idx: Tensor | None = None

    # --- writing ----------------------------------------------------------------------------

    def add(self, batch: dict[str, Tensor], mask: Tensor | None = None) -> None:
        """Append the rows of ``batch`` (each field ``[n, *shape]``) whose ``mask`` is true.

        No host sync either way. A masked add needs ``n <= capacity``; an unmasked one keeps
        the newest ``capacity`` rows of a larger batch.
        """
        n = self._batch_len(batch)
        if mask is None and n > self.capacity:
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            self._pushed += n - self.capacity
            n = self.capacity
        if mask is not None and (mask.shape != (n,) or n > self.capacity):
            raise ValueError(f"mask must be [{n}] with n <= capacity {self.capacity}")
        offsets = torch.arange(n, device=self.device)
        if mask is None:
            count: Tensor | int = n
            dest = (self._ptr + offsets) % self.capacity
        else:
            offsets = torch.cumsum(mask, 0) - 1
            count = mask.sum()
            dest = torch.where(mask, (self._ptr + offsets) % self.capacity, self.capacity)
        for name, store in self.data.items():
            store.index_copy_(0, dest, batch[name].to(store.dtype))
        self._pushed_at.index_copy_(0, dest, self._pushed + offsets)
        self._ptr.add_(count).remainder_(self.capacity)
        self._size.add_(count).clamp_(max=self.capacity)
        self._pushed.add_(count)
        self._offered += n

    def _batch_len(self, batch: dict[str, Tensor]) -> int:
        if batch.keys() != self.data.keys():
            raise KeyError(f"batch fields {sorted(batch)} != buffer fields {sorted(self.data)}")
        lengths = {v.shape[0] for v in batch.values()}
        if len(lengths) != 1:
            raise ValueError(f"batch fields have different lengths: {lengths}")
        return lengths.pop()

    # --- reading ----------------------------------------------------------------------------

    def sample(
        self, batch_size: int, generator: torch.Generator, fields: tuple[str, ...] | None = None
    ) -> dict[str, Tensor]:
        """``batch_size`` rows drawn uniformly with replacement (only ``fields``, if given);
        no host sync."""
        if self._offered == 0:
            raise RuntimeError("cannot sample from an empty buffer")
        u = torch.rand(batch_size, generator=generator, device=self.device, dtype=torch.float64)
        # The fill level stays on the device; float64 keeps the draw uniform up to 2^53 rows.
        idx = torch.minimum((u * self._size).long(), (self._size - 1).clamp(min=0))
        self._last_idx = idx
        self.sampled_out += batch_size
        names = self.data.keys() if fields is None else fields
        return {name: self.data[name][idx] for name in names}

    def __len__(self) -> int:
        return int(self._size)  # sync-ok: a host read, for set-up and tests, not the hot loop

    @property
    def size(self) -> Tensor:
        """Rows holding data, as a device tensor (read it without a sync)."""
        return self._size

    def rows(self) -> dict[str, Tensor]:
        """Views of every filled row (not in insertion order once the ring has wrapped)."""
        n = len(self)
        return {name: store[:n] for name, store in self.data.items()}

    def metrics(self) -> dict[str, Any]:
        """Counters plus the mean age (in pushes) of the last sampled batch; tensors, no sync."""
        out: dict[str, Any] = {
            "pushed_in": self._pushed,
            "sampled_out": self.sampled_out,
            "current_have": self._size,
        }
        if self._last_idx is not None:
            age = self._pushed - self._pushed_at[self._last_idx].float().mean()
            out["staleness"] = age
        return out

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Only the filled rows are stored, in ring order, so a checkpoint stays small."""
        size = len(self)
        return {
            "capacity": self.capacity,
            "ptr": int(self._ptr),  # sync-ok: checkpoint
            "size": size,
            "pushed_in": int(self._pushed),  # sync-ok: checkpoint
            "offered": self._offered,
            "sampled_out": self.sampled_out,
            "data": {k: v[:size].cpu() for k, v in self.data.items()},  # sync-ok: checkpoint
            "pushed_at": self._pushed_at[:size].cpu(),  # sync-ok: checkpoint
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore rows; a checkpoint from a buffer of another capacity keeps its newest rows."""
        if set(state["data"]) != set(self.data):
            raise KeyError(
                f"checkpoint buffer fields {sorted(state['data'])} != {sorted(self.data)}"
            )
        data, pushed_at, ptr = dict(state["data"]), state["pushed_at"], state["ptr"]
        size = state["size"]
        if state["capacity"] != self.capacity:
            # Re-lay the ring oldest-first, then keep what fits (same layout if it all fits).
            order = torch.cat([torch.arange(ptr, size), torch.arange(0, ptr)])[-self.capacity :]
            data = {k: v[order] for k, v in data.items()}
            pushed_at, size = pushed_at[order], len(order)
            ptr = size % self.capacity
        for name, store in self.data.items():
            store[:size] = data[name].to(self.device)
        self._pushed_at[:size] = pushed_at.to(self.device)
        self._ptr.fill_(ptr)
        self._size.fill_(size)
        self._pushed.fill_(state["pushed_in"])
        self._offered = state.get("offered", state["pushed_in"])
        self.sampled_out = state["sampled_out"]
