"""Fitting the dynamics ensemble as MBPO does: holdout split, bootstrap per member, early
stopping on holdout NLL, best snapshot per member, elites; capped in epochs and seconds.

Inside an epoch nothing is read back to the host; the early-stopping decision reads one small
tensor per epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from mbrl.config import ModelConfig
from mbrl.models.dynamics import DynamicsModel
from mbrl.optim import GuardedStep, adam


class ModelTrainer:
    def __init__(
        self, model: DynamicsModel, cfg: ModelConfig, amp: str = "off", compile: bool = False
    ) -> None:
        self.model, self.cfg = model, cfg
        if any(p.shape[0] != cfg.members for p in model.density.parameters()):
            raise ValueError("every density parameter needs a leading member dimension")
        self.opt = adam(model.density.parameters(), cfg.lr, cfg.weight_decay, decoupled=True)
        self.amp_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        self.scaler = torch.amp.GradScaler(model.device.type, enabled=amp == "fp16")
        self._step = GuardedStep(self.opt, self.scaler)  # a non-finite batch is skipped
        self.fits = 0
        self._train_rows = 0
        self._loss: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]] = self._batch_loss
        if compile:  # the last minibatch's size changes with the data: shapes may vary
            self._loss = torch.compile(self._batch_loss, dynamic=None)

    def _autocast(self) -> torch.autocast:
        dev = self.model.elites.device.type
        return torch.autocast(
            dev, dtype=self.amp_dtype or torch.float32, enabled=self.amp_dtype is not None
        )

    def fit(
        self, obs: Tensor, act: Tensor, next_obs: Tensor, rew: Tensor, generator: torch.Generator
    ) -> dict[str, Any]:
        """Fit on N real transitions ([N, ...] device tensors). Returns ``model/*`` metrics."""
        cfg, model = self.cfg, self.model
        target = model.targets(obs, next_obs, rew)
        model.fit_normalizers(obs, act, target)
        x, y = model.in_norm(torch.cat([obs, act], -1)), model.out_norm(target)
        train_idx, hold_idx = self._split(x.shape[0], generator)
        self._train_rows = train_idx.shape[0]
        boot = train_idx[
            torch.randint(
                0,
                train_idx.shape[0],
                (cfg.members, train_idx.shape[0]),
                generator=generator,
                device=x.device,
            )
        ]  # bootstrap: each member its own resample of the training rows
        best = torch.full((cfg.members,), float("inf"), device=x.device)
        snapshot = [p.detach().clone() for p in model.density.parameters()]
        start, epoch, stale, train_nll = time.perf_counter(), 0, 0, torch.zeros(())
        while True:
            train_nll = self._epoch(x, y, boot, generator)
            epoch += 1
            hold = self.holdout_nll(x[hold_idx], y[hold_idx])
            improved = (best - hold) / best.abs().clamp_min(1e-8) > cfg.improvement
            improved |= torch.isinf(best) & torch.isfinite(hold)
            best = torch.where(improved, hold, best)
            self._keep_improved(snapshot, improved)
            stale = 0 if bool(improved.any()) else stale + 1  # sync-ok: one read per epoch
            if self._done(epoch, stale, start):
                break
        self._restore(snapshot)
        return self._finish(x[hold_idx], y[hold_idx], best, train_nll, epoch, start)

    def _split(self, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        if n < 2:
            raise ValueError(f"need at least 2 transitions to fit the model, got {n}")
        perm = torch.randperm(n, generator=gen, device=self.model.device)
        n_hold = max(1, min(int(n * self.cfg.holdout_ratio), self.cfg.max_holdout))
        return perm[n_hold:], perm[:n_hold]

    def _epoch(self, x: Tensor, y: Tensor, boot: Tensor, gen: torch.Generator) -> Tensor:
        """One pass over each member's bootstrap sample; returns the mean train NLL [()]."""
        e, n = boot.shape
        order = boot.gather(1, torch.argsort(torch.rand(e, n, generator=gen, device=x.device), 1))
        total = torch.zeros((), device=x.device)
        steps = 0
        for i in range(0, n, self.cfg.batch_size):
            idx = order[:, i : i + self.cfg.batch_size]  # [E, b]
            loss, nll = self._loss(x[idx], y[idx])
            self._step(loss)
            total = total + nll.detach().mean()
            steps += 1
        return total / max(steps, 1)

    def _batch_loss(self, xb: Tensor, yb: Tensor) -> tuple[Tensor, Tensor]:
        """Loss of one minibatch [E, b, ...] per member, and the per-member NLL [E]."""
        with self._autocast():
            nll = -self.model.dist(xb).log_prob(yb).mean(dim=1)  # [E]
        return nll.sum() + self.model.regularizer(), nll

    @torch.no_grad()
    def holdout_nll(self, x: Tensor, y: Tensor) -> Tensor:
        """Mean NLL per member [E] on normalised holdout rows, in chunks."""
        parts = []
        for i in range(0, x.shape[0], 8192):
            with self._autocast():
                parts.append(-self.model.dist(x[i : i + 8192]).log_prob(y[i : i + 8192]))
        return torch.cat(parts, dim=1).mean(dim=1).nan_to_num(float("inf"))

    @torch.no_grad()
    def _keep_improved(self, snapshot: list[Tensor], improved: Tensor) -> None:
        # Every parameter has a leading member dimension: copy the improved members only.
        for saved, p in zip(snapshot, self.model.density.parameters(), strict=True):
            mask = improved.view(-1, *([1] * (p.dim() - 1)))
            saved.copy_(torch.where(mask, p, saved))

    @torch.no_grad()
    def _restore(self, snapshot: list[Tensor]) -> None:
        for saved, p in zip(snapshot, self.model.density.parameters(), strict=True):
            p.copy_(saved)

    def _done(self, epoch: int, stale: int, start: float) -> bool:
        cfg = self.cfg
        if stale > cfg.patience:
            return True
        if cfg.max_epochs is not None and epoch >= cfg.max_epochs:
            return True
        return cfg.max_seconds is not None and time.perf_counter() - start >= cfg.max_seconds

    def _finish(
        self, xh: Tensor, yh: Tensor, best: Tensor, train_nll: Tensor, epochs: int, start: float
    ) -> dict[str, Any]:
        elites = torch.topk(best, self.cfg.elites, largest=False).indices.sort().values
        self.model.elites.copy_(elites)
        with torch.no_grad(), self._autocast():
            pred = self.model.dist(xh, elites).mode()
        self.fits += 1
        return {
            "model/train_nll": train_nll,
            "model/holdout_nll": best[elites].mean(),
            "model/holdout_mse": (pred - yh).square().mean(),
            "model/epochs": epochs,
            "model/elites": self.cfg.elites,
            "model/fit_seconds": time.perf_counter() - start,
            "model/holdout_rows": int(xh.shape[0]),
            "model/train_rows": int(self._train_rows),
            "model/nonfinite_steps": self._step.skipped,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "opt": self.opt.state_dict(),
            "scaler": self.scaler.state_dict(),
            "fits": self.fits,
            "nonfinite_steps": self._step.skipped.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.opt.load_state_dict(state["opt"])
        self.scaler.load_state_dict(state["scaler"])
        self.fits = state["fits"]
        self._step.skipped.copy_(state["nonfinite_steps"])
