"""Where the hand-written SAC update's matmuls and ReLU backwards write: fresh outputs
(:class:`Fresh`) or buffers reused by every update (:class:`Workspace`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

# ReLU's backward from the layer's output in one kernel (grad where out > 0), with an out=
# variant; torch has no public function for it.
_threshold_backward: Any = torch.ops.aten.threshold_backward


class Fresh:
    """The update's matmuls and ReLU backwards with a new output tensor each call: what
    torch.compile traces (inductor plans the graph's buffers itself), and what autocast
    needs."""

    def start(self) -> None:
        """A new update begins."""

    def mm(self, a: Tensor, b: Tensor) -> Tensor:
        return torch.mm(a, b, out=self._out((a.shape[0], b.shape[1]), a))

    def bmm(self, a: Tensor, b: Tensor) -> Tensor:
        out = self._out((a.shape[0], a.shape[1], b.shape[2]), a)
        if a.shape[-1] == 1:  # an outer product: a broadcast multiply is exact and faster
            return torch.mul(a, b, out=out)
        return torch.bmm(a, b, out=out)

    def relu_backward(self, grad: Tensor, out: Tensor) -> Tensor:
        """ReLU's backward from its output: ``grad`` where ``out > 0``, else 0 (one kernel)."""
        return _threshold_backward(grad, out, 0)

    def _out(self, shape: tuple[int, ...], like: Tensor) -> Tensor | None:
        """Where the next output goes: None, a new tensor."""
        return None


class Workspace(Fresh):
    """The same operations writing into buffers that are reused, in call order, by every
    update (eager runs). On a CPU a freshly allocated output misses the cache on every line
    it writes (and may be pages the kernel must fault in); a reused one is warm (the gain, with
    bit-identical results: docs/benchmarks.md). The buffers hold one
    update's intermediate values, so nothing returned may alias them past the next update:
    the gradients are consumed by the optimizer step of the same update."""

    def __init__(self) -> None:
        self._bufs: list[Tensor] = []
        self._next = 0

    def start(self) -> None:
        self._next = 0

    def relu_backward(self, grad: Tensor, out: Tensor) -> Tensor:
        # In place: ``grad`` is always a matmul output of this update, needed only here.
        return _threshold_backward.grad_input(grad, out, 0, grad_input=grad)

    def _out(self, shape: tuple[int, ...], like: Tensor) -> Tensor:
        i, self._next = self._next, self._next + 1
        if i == len(self._bufs):
            self._bufs.append(like.new_empty(shape))
        buf = self._bufs[i]
        if buf.shape != shape or buf.dtype != like.dtype or buf.device != like.device:
            buf = self._bufs[i] = like.new_empty(shape)
        return buf
