"""Optimizers: fused Adam, and a guarded step that skips non-finite losses without a host sync."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import nn

from mbrl import collectives

__all__ = ["AMP_DTYPES", "GuardedStep", "adam", "autocast"]

# amp setting -> autocast dtype (None: fp32 throughout)
AMP_DTYPES: dict[str, torch.dtype | None] = {
    "off": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def autocast(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager[Any]:
    """bf16/fp16 autocast on ``device`` (hidden layers under AMP); a no-op for ``None``."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def adam(
    params: Iterable[nn.Parameter] | Iterable[torch.Tensor] | list[dict[str, Any]],
    lr: float,
    weight_decay: float = 0.0,
    decoupled: bool = False,
) -> torch.optim.Optimizer:
    """``torch.optim.Adam`` (``AdamW`` with ``decoupled``): fused where torch has a fused
    kernel for the parameters' device, and on CUDA ``capturable``, so that its step can be
    part of a CUDA graph (its step counts then live on the device).

    The fused kernel is faster than torch's default per-tensor Adam (docs/benchmarks.md).
    """
    cls = AdamW if decoupled else Adam
    items: list[Any] = list(params)
    first = items[0]["params"][0] if isinstance(items[0], dict) else items[0]
    capturable = first.device.type == "cuda"
    try:
        opt = cls(items, lr=lr, weight_decay=weight_decay, fused=True, capturable=capturable)
    except (RuntimeError, ValueError):  # a device or dtype without a fused kernel
        opt = cls(items, lr=lr, weight_decay=weight_decay, capturable=capturable)
    return opt


# torch warns at a capturable optimizer's first step outside a CUDA graph that capturable "can
# impair performance" (Optimizer._accelerator_graph_capture_health_check, 2.13; earlier
# _cuda_graph_capture_health_check), unless `_warned_capturable_if_run_uncaptured` is set. Its
# constructor sets it (2.11 and 2.13 alike), but __getstate__ leaves it out, so a copy
# (copy.deepcopy: the compile warm-ups' twins of the agent and the fit step) warned at its
# first eager step. Capturable is meant here (each graphed step has eager warm-up steps
# before its capture), so a copy keeps the flag as the original has it.


class Adam(torch.optim.Adam):
    """torch's Adam, whose copies do not warn about capturable (above)."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._warned_capturable_if_run_uncaptured = True


class AdamW(torch.optim.AdamW):
    """torch's AdamW, whose copies do not warn about capturable (above)."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._warned_capturable_if_run_uncaptured = True


class GuardedStep:
    """zero_grad, backward and optimizer step, skipped on the device when the loss is not
    finite: no host sync decides it. A fused optimizer skips through its ``found_inf`` input
    (its moments and step count stay as they were); others get zeroed gradients. fp16's
    GradScaler skips non-finite steps itself. ``skipped`` counts them (a device tensor).

    The whole step is device work, so it can be part of a CUDA graph."""

    def __init__(self, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
        self.opt, self.scaler = opt, scaler
        self._params = [p for group in opt.param_groups for p in group["params"]]
        device = opt.param_groups[0]["params"][0].device
        self.skipped = torch.zeros((), dtype=torch.long, device=device)
        self._found_inf: torch.Tensor | None = None
        if opt.defaults.get("fused") and not scaler.is_enabled():
            self._found_inf = torch.zeros((), dtype=torch.float32, device=device)  # (fused: fp32)
            # (How GradScaler hands a fused optimizer its skip flag.)
            opt.found_inf = self._found_inf  # type: ignore[attr-defined]

    def _grads(self) -> list[torch.Tensor]:
        """The parameters' gradients after backward (zeros where a parameter got none)."""
        for p in self._params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return [p.grad for p in self._params if p.grad is not None]

    def __call__(self, loss: torch.Tensor) -> None:
        finite = torch.isfinite(loss.detach())
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        if collectives.active():  # one run on several processes: average over ranks first
            finite = collectives.average_grads_(self._grads(), finite)
        self.skipped += ~finite
        if self._found_inf is not None:
            torch.logical_not(finite, out=self._found_inf)
        elif not self.scaler.is_enabled():
            for group in self.opt.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.copy_(torch.where(finite, p.grad, torch.zeros_like(p.grad)))
        self.scaler.step(self.opt)
        self.scaler.update()
