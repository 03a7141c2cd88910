"""Network building blocks: plain MLPs here; batched ensembles come from ``flows.nn``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from flows.nn import EnsembleLinear, EnsembleMLP

__all__ = ["EnsembleLinear", "EnsembleMLP", "GuardedStep", "adam", "mlp"]


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, act: type[nn.Module] = nn.ReLU
) -> nn.Sequential:
    """``in -> hidden... -> out`` with ``act`` between layers and a linear output."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), act()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


def adam(
    params: Iterable[nn.Parameter] | Iterable[torch.Tensor] | list[dict[str, Any]],
    lr: float,
    weight_decay: float = 0.0,
    decoupled: bool = False,
) -> torch.optim.Optimizer:
    """Adam (or AdamW with ``decoupled``) with the fused implementation where torch has one.

    Measured side by side on the 2-core CPU (SAC update, batch 256, 256x256): 13.6 ms with
    torch's default per-tensor Adam, 11.1-11.7 ms fused.
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
    (a device tensor)."""

    def __init__(self, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
        self.opt, self.scaler = opt, scaler
        self._params = [p for group in opt.param_groups for p in group["params"]]
        device = opt.param_groups[0]["params"][0].device
        self.skipped = torch.zeros((), dtype=torch.long, device=device)
        self._found_inf: torch.Tensor | None = None
        if opt.defaults.get("fused") and not scaler.is_enabled():
            self._found_inf = torch.zeros((), device=device)
            opt.found_inf = self._found_inf  # type: ignore[attr-defined]

    def __call__(self, loss: torch.Tensor, grads: Sequence[torch.Tensor] | None = None) -> None:
        """``grads``: the loss's gradients in the order of the optimizer's parameters, when
        the caller computed them; else autograd's backward does."""
        bad = ~torch.isfinite(loss.detach())
        self.skipped += bad
        if grads is None:
            self.opt.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
        else:
            for p, g in zip(self._params, grads, strict=True):
                p.grad = g
        if self._found_inf is not None:
            self._found_inf.copy_(bad)
        elif not self.scaler.is_enabled():
            for group in self.opt.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad.copy_(torch.where(bad, torch.zeros_like(p.grad), p.grad))
        self.scaler.step(self.opt)
        self.scaler.update()
