"""A replay buffer of preallocated tensors on the training device.

Rows are written by index arithmetic into a ring (oldest rows overwritten first) and sampled
with ``torch.randint`` driven by an explicit ``torch.Generator``, so a run is reproducible and
resumable. The same class serves as MBPO's model pool (with extra fields).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

TRANSITION_FIELDS = ("obs", "act", "rew", "next_obs", "terminated", "truncated")


def transition_shapes(obs_dim: int, act_dim: int) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Field layout of a real-env transition: per-row shape and dtype."""
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

    def __init__(
        self,
        capacity: int,
        fields: dict[str, tuple[tuple[int, ...], torch.dtype]],
        device: torch.device | str = "cpu",
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"buffer capacity must be a positive integer, got {capacity}")
        self.capacity = capacity
        self.device = torch.device(device)
        self.data: dict[str, Tensor] = {
            name: torch.zeros((capacity, *shape), dtype=dtype, device=self.device)
            for name, (shape, dtype) in fields.items()
        }
        # Global index of each row's push: tells how old a sampled row is (staleness).
        self._pushed_at = torch.zeros(capacity, dtype=torch.long, device=self.device)
        self.ptr = 0  # next row to write
        self.size = 0  # rows holding data
        self.pushed_in = 0  # rows ever written
        self.sampled_out = 0  # rows ever sampled
        self._last_idx: Tensor | None = None

    def __len__(self) -> int:
        return self.size

    def add(self, batch: dict[str, Tensor]) -> None:
        """Append ``n`` rows (each field ``[n, *shape]``); the ring overwrites the oldest."""
        n = self._batch_len(batch)
        if n > self.capacity:  # only the newest `capacity` rows can survive
            batch = {k: v[-self.capacity :] for k, v in batch.items()}
            self.pushed_in += n - self.capacity
            n = self.capacity
        first = min(n, self.capacity - self.ptr)
        self._write(slice(self.ptr, self.ptr + first), batch, slice(0, first))
        if first < n:  # the part that wraps to the start of the ring
            self._write(slice(0, n - first), batch, slice(first, n))
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.pushed_in += n

    def _batch_len(self, batch: dict[str, Tensor]) -> int:
        if batch.keys() != self.data.keys():
            raise KeyError(f"batch fields {sorted(batch)} != buffer fields {sorted(self.data)}")
        lengths = {v.shape[0] for v in batch.values()}
        if len(lengths) != 1:
            raise ValueError(f"batch fields have different lengths: {lengths}")
        return lengths.pop()

    def _write(self, rows: slice, batch: dict[str, Tensor], src: slice) -> None:
        for name, store in self.data.items():
            store[rows] = batch[name][src]
        start = self.pushed_in + src.start
        torch.arange(start, start + (rows.stop - rows.start), out=self._pushed_at[rows])

    def sample(self, batch_size: int, generator: torch.Generator) -> dict[str, Tensor]:
        """``batch_size`` rows drawn uniformly with replacement; no host sync."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty buffer")
        idx = torch.randint(0, self.size, (batch_size,), device=self.device, generator=generator)
        self._last_idx = idx
        self.sampled_out += batch_size
        return {name: store[idx] for name, store in self.data.items()}

    def metrics(self) -> dict[str, Any]:
        """Counters plus the mean age (in pushes) of the last sampled batch."""
        out: dict[str, Any] = {
            "pushed_in": self.pushed_in,
            "sampled_out": self.sampled_out,
            "current_have": self.size,
        }
        if self._last_idx is not None:
            age = self.pushed_in - self._pushed_at[self._last_idx].float().mean()
            out["staleness"] = age
        return out

    def state_dict(self) -> dict[str, Any]:
        """Only the filled rows are stored, in ring order, so a checkpoint stays small."""
        return {
            "capacity": self.capacity,
            "ptr": self.ptr,
            "size": self.size,
            "pushed_in": self.pushed_in,
            "sampled_out": self.sampled_out,
            "data": {k: v[: self.size].cpu() for k, v in self.data.items()},  # sync-ok: checkpoint
            "pushed_at": self._pushed_at[: self.size].cpu(),  # sync-ok: checkpoint
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
        self.ptr, self.size = ptr, size
        self.pushed_in, self.sampled_out = state["pushed_in"], state["sampled_out"]
