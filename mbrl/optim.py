"""Optimizers: fused Adam, and a guarded step that skips non-finite losses without a host sync."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from mbrl.runtime import distributed

__all__ = ["GuardedStep", "adam"]


class DirectStep(Protocol):
    """An optimizer step given the gradients, skipped where the 0-dim bool ``finite`` is
    False (e.g. ``mbrl.fastpath.adam_step.FusedAdamStep``)."""

    def __call__(self, grads: Sequence[torch.Tensor], finite: torch.Tensor) -> None: ...

    def sync(self) -> None: ...  # re-read the optimizer's state after it was loaded


def adam(
    params: Iterable[nn.Parameter] | Iterable[torch.Tensor] | list[dict[str, Any]],
    lr: float,
    weight_decay: float = 0.0,
    decoupled: bool = False,
) -> torch.optim.Optimizer:
    """Adam (or AdamW with ``decoupled``) with the fused implementation where torch has one.

    The fused kernel is faster than torch's default per-tensor Adam (docs/benchmarks.md).
    """
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    params = list(params)  # type: ignore[assignment]
    try:
        return cls(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        return cls(params, lr=lr, weight_decay=weight_decay)


class GuardedStep:
    """zero_grad, backward (or gradients given by the caller) and optimizer step, skipped on
    the device when the loss is not finite: no host sync decides it. A fused optimizer skips
    through its ``found_inf`` input (its moments and step count stay as they were); others get
    zeroed gradients. fp16's GradScaler skips non-finite steps itself. ``skipped`` counts them
    (a device tensor).

    ``direct``: a step that replaces ``opt.step()`` (not with a GradScaler on); the optimizer
    must then be stepped only through this object, and ``sync()`` called after loading its
    state."""

    def __init__(
        self,
        opt: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler,
        direct: DirectStep | None = None,
    ) -> None:
        self.opt, self.scaler = opt, scaler
        self._params = [p for group in opt.param_groups for p in group["params"]]
        device = opt.param_groups[0]["params"][0].device
        self.skipped = torch.zeros((), dtype=torch.long, device=device)
        self._found_inf: torch.Tensor | None = None
        self._direct = None if scaler.is_enabled() else direct
        if self._direct is None and opt.defaults.get("fused") and not scaler.is_enabled():
            self._found_inf = torch.zeros((), device=device)
            opt.found_inf = self._found_inf  # type: ignore[attr-defined]

    def sync(self) -> None:
        """After ``opt.load_state_dict``: the direct step re-reads the optimizer's state."""
        if self._direct is not None:
            self._direct.sync()

    def _grads(self) -> list[torch.Tensor]:
        """The parameters' gradients after backward (zeros where a parameter got none)."""
        for p in self._params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return [p.grad for p in self._params if p.grad is not None]

    def __call__(self, loss: torch.Tensor, grads: Sequence[torch.Tensor] | None = None) -> None:
        """``grads``: the loss's gradients in the order of the optimizer's parameters, when
        the caller computed them; else autograd's backward does."""
        finite = torch.isfinite(loss.detach())
        if grads is None:
            self.opt.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
        if distributed.active():  # one run on several processes: average over ranks first
            grads = grads if grads is not None else self._grads()
            finite = distributed.average_grads_(grads, finite)
        self.skipped += ~finite
        if self._direct is not None:
            if grads is None:
                grads = [p.grad for p in self._params]
            self._direct(grads, finite)
            return
        if grads is not None:
            for p, g in zip(self._params, grads, strict=True):
                p.grad = g
        if self._found_inf is not None:
            torch.logical_not(finite, out=self._found_inf)
        elif not self.scaler.is_enabled():
            for group in self.opt.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.copy_(torch.where(finite, p.grad, torch.zeros_like(p.grad)))
        self.scaler.step(self.opt)
        self.scaler.update()
