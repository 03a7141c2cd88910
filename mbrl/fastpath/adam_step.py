"""A direct fused-Adam step: ``opt.step()`` for a fused Adam/AdamW with the gradients passed in,
one kernel call per parameter group, without ``torch.optim``'s per-step Python. It calls
torch's fused Adam kernels (``torch._fused_adam_``) directly; where a torch build lacks them,
:func:`direct_adam_supported` is False and ``opt.step()`` is used."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def direct_adam_supported(opt: torch.optim.Optimizer) -> bool:
    """Whether ``FusedAdamStep`` can step ``opt``: a fused Adam/AdamW without amsgrad,
    maximize or differentiable."""
    d = opt.defaults
    return (
        hasattr(torch, "_fused_adam_")
        and hasattr(torch, "_fused_adamw_")
        and isinstance(opt, torch.optim.Adam | torch.optim.AdamW)
        and bool(d.get("fused"))
        and not (d.get("amsgrad") or d.get("maximize") or d.get("differentiable"))
    )


class FusedAdamStep:
    """``opt.step()`` for a fused Adam/AdamW, with the gradients passed in and without
    ``torch.optim``'s per-step Python (state lookups, grouping by device and dtype): one
    ``_fused_adam_`` kernel call per parameter group.

    All parameters share one step-count tensor, as they always step together: the count is
    one in-place add instead of two per-tensor loops (CPU foreach ops are Python-free but
    still one small kernel per tensor). The optimizer's ``state`` holds that shared tensor,
    and its ``state_dict`` gives each parameter its own copy, so that torch's Adam can load it
    (torch increments every listed step tensor); call ``sync()`` after ``opt.load_state_dict``.

    Bit-identical to ``opt.step()``; its speed-up is in docs/benchmarks.md.
    """

    def __init__(self, opt: torch.optim.Optimizer) -> None:
        if not direct_adam_supported(opt):
            raise ValueError(
                f"FusedAdamStep needs a fused Adam/AdamW without amsgrad/maximize, got {opt!r}"
            )
        self.opt = opt
        decoupled = isinstance(opt, torch.optim.AdamW) or opt.defaults.get("decoupled_weight_decay")
        self._kernel = torch._fused_adamw_ if decoupled else torch._fused_adam_
        self.sync()
        opt.register_state_dict_post_hook(_unshare_steps)

    def sync(self) -> None:
        """Create missing state and (re)share one step count among all parameters."""
        params = [p for g in self.opt.param_groups for p in g["params"]]
        steps = [self.opt.state[p]["step"] for p in params if "step" in self.opt.state[p]]
        if steps and not all(torch.equal(steps[0], s) for s in steps):
            raise ValueError("FusedAdamStep: the optimizer's parameters have different steps")
        step = (
            steps[0].to(params[0].device, torch.float32).clone()
            if steps
            else torch.zeros((), dtype=torch.float32, device=params[0].device)
        )
        for p in params:
            state = self.opt.state[p]
            if "exp_avg" not in state:
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] = step
        self.step_count, self._count = step, len(params)
        self._found_inf = torch.zeros((), device=step.device)
        self._lists = [
            (
                g,
                list(g["params"]),
                [self.opt.state[p]["exp_avg"] for p in g["params"]],
                [self.opt.state[p]["exp_avg_sq"] for p in g["params"]],
                [step] * len(g["params"]),
            )
            for g in self.opt.param_groups
        ]

    def __call__(self, grads: Sequence[torch.Tensor], finite: torch.Tensor) -> None:
        """One step with ``grads`` in the order of the optimizer's parameters; skipped (state
        and count unchanged) where the 0-dim bool ``finite`` is False."""
        if len(grads) != self._count:
            raise ValueError(f"FusedAdamStep: {len(grads)} gradients for {self._count} parameters")
        found_inf = torch.logical_not(finite, out=self._found_inf)  # the kernels' skip flag
        self.step_count.add_(finite)  # the kernels read the count after the increment
        start = 0
        for g, params, exp_avgs, exp_avg_sqs, steps in self._lists:
            end = start + len(params)
            self._kernel(
                params,
                list(grads[start:end]),
                exp_avgs,
                exp_avg_sqs,
                [],
                steps,
                amsgrad=False,
                lr=g["lr"],
                beta1=g["betas"][0],
                beta2=g["betas"][1],
                weight_decay=g["weight_decay"],
                eps=g["eps"],
                maximize=False,
                grad_scale=None,
                found_inf=found_inf,
            )
            start = end


def _unshare_steps(opt: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
    # torch's state_dict() holds the optimizer's own per-parameter dicts, not copies: new
    # dicts here, or the live state would lose the shared count (and every later checkpoint
    # would save the count of the first one).
    state_dict["state"] = {
        k: {**v, "step": v["step"].clone()} if "step" in v else v
        for k, v in state_dict["state"].items()
    }
    return state_dict
