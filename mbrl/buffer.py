"""A replay buffer of preallocated tensors on the training device.

Rows are written by index arithmetic into a ring (oldest rows overwritten first) and sampled
with an explicit ``torch.Generator``, so a run is reproducible and resumable. The write pointer
and the fill level live on the device too: :meth:`ReplayBuffer.add` with a ``mask`` (model
rollouts, whose rows stop at different steps) writes only the kept rows without ever asking the
host how many there were. The same class is the real buffer and MBPO's model pool.

The *live* rows are the newest ``min(rows written, window)``, in write order; ``window`` is the
capacity unless :meth:`ReplayBuffer.set_window` narrows it. Every read (``sample``, ``rows``,
checkpoints) addresses live rows by their position in write order, never by where they sit in
the ring, so a restored buffer laid out differently reads exactly like the original.
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


def random_transitions(
    n: int, obs_dim: int, act_dim: int, generator: torch.Generator, terminal: float = 0.2
) -> dict[str, Tensor]:
    """``n`` random transitions in the fields of :func:`transition_fields`, on the
    generator's device (for compile warm-ups, benchmarks and tests): standard-normal
    observations and rewards, uniform actions in [-1, 1], a share ``terminal`` of the rows
    terminated, none truncated."""

    def rand(*shape: int) -> Tensor:
        return torch.rand(shape, generator=generator, device=generator.device)

    def randn(*shape: int) -> Tensor:
        return torch.randn(shape, generator=generator, device=generator.device)

    return {
        "obs": randn(n, obs_dim),
        "act": rand(n, act_dim) * 2 - 1,
        "rew": randn(n),
        "next_obs": randn(n, obs_dim),
        "terminated": rand(n) < terminal,
        "truncated": torch.zeros(n, dtype=torch.bool, device=generator.device),
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
        self.window = capacity  # live rows at most: the newest `window` written rows
        # Rows ever sampled: a device counter, so that a sample inside a CUDA graph counts too.
        self._sampled = torch.zeros((), dtype=torch.long, device=self.device)
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
        self._size.add_(count).clamp_(max=self.window)
        self._pushed.add_(count)
        self._offered += n

    def set_window(self, window: int) -> None:
        """Keep only the newest ``window`` rows live (``1 <= window <= capacity``).

        MBPO's model pool: allocated once at its largest size, while SAC samples only from the
        rows a pool of the current size would hold. Narrowing drops the oldest live rows;
        widening keeps the live rows and lets new writes accumulate up to the new window, as
        MBPO's copy of its pool into a larger one does (rows that left the window never return).
        No host sync.
        """
        if not 1 <= window <= self.capacity:
            raise ValueError(f"window must be in [1, capacity={self.capacity}], got {window}")
        self.window = window
        self._size.clamp_(max=window)

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
        k = torch.minimum((u * self._size).long(), (self._size - 1).clamp(min=0))
        idx = self._ring_index(k)
        self._last_idx = idx
        self._sampled += batch_size
        names = self.data.keys() if fields is None else fields
        return {name: self.data[name][idx] for name in names}

    def _ring_index(self, k: Tensor) -> Tensor:
        """Ring row of the k-th oldest live row (k in [0, size))."""
        return (self._ptr - self._size + k).remainder_(self.capacity)

    def __len__(self) -> int:
        return int(self._size)  # sync-ok: a host read, for set-up and tests, not the hot loop

    @property
    def offered(self) -> int:
        """Rows ever offered to the buffer (host side, no sync: all of them for unmasked
        adds, an upper bound for masked ones)."""
        return self._offered

    @property
    def sampled_out(self) -> int:
        """Rows ever sampled (a host read: for tests and checkpoints)."""
        return int(self._sampled)  # sync-ok: not in the hot loop

    @property
    def size(self) -> Tensor:
        """Rows holding data, as a device tensor (read it without a sync)."""
        return self._size

    def rows(self) -> dict[str, Tensor]:
        """Every live row, oldest first: views while the live rows are contiguous in the ring
        (a buffer that never wrapped), else a gathered copy. One host read."""
        n, end = len(self), int(self._ptr)  # sync-ok: once per model fit / checkpoint
        if end >= n:
            return {name: store[end - n : end] for name, store in self.data.items()}
        idx = self._ring_index(torch.arange(n, device=self.device))
        return {name: store[idx] for name, store in self.data.items()}

    def metrics(self) -> dict[str, Any]:
        """Counters plus the mean age (in pushes) of the last sampled batch; tensors, no sync."""
        out: dict[str, Any] = {
            "pushed_in": self._pushed,
            "sampled_out": self._sampled,
            "current_have": self._size,
        }
        if self._last_idx is not None:
            age = self._pushed - self._pushed_at[self._last_idx].float().mean()
            out["staleness"] = age
        return out

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Only the live rows are stored, oldest first, so a checkpoint stays small."""
        n, end = len(self), int(self._ptr)  # sync-ok: checkpoint
        idx = self._ring_index(torch.arange(n, device=self.device))
        return {
            "capacity": self.capacity,
            "window": None if self.window == self.capacity else self.window,  # None: all
            "size": n,
            "pushed_in": int(self._pushed),  # sync-ok: checkpoint
            "offered": self._offered,
            "sampled_out": self.sampled_out,
            "data": {k: v[idx].cpu() for k, v in self.data.items()},  # sync-ok: checkpoint
            "pushed_at": self._pushed_at[idx].cpu(),  # sync-ok: checkpoint
            "ptr": end,  # where the ring stood (informational: rows are stored oldest first)
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the live rows, oldest first from ring row 0; a buffer of a smaller capacity
        (or window) keeps the newest rows."""
        if set(state["data"]) != set(self.data):
            raise KeyError(
                f"checkpoint buffer fields {sorted(state['data'])} != {sorted(self.data)}"
            )
        window = state.get("window")
        self.window = self.capacity if window is None else min(window, self.capacity)
        keep = min(state["size"], self.window)
        start = state["size"] - keep
        for name, store in self.data.items():
            store[:keep] = state["data"][name][start:].to(self.device)
        self._pushed_at[:keep] = state["pushed_at"][start:].to(self.device)
        self._ptr.fill_(keep % self.capacity)
        self._size.fill_(keep)
        self._pushed.fill_(state["pushed_in"])
        self._offered = state.get("offered", state["pushed_in"])
        self._sampled.fill_(state["sampled_out"])
