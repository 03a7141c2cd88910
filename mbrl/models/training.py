"""Fitting the dynamics ensemble as MBPO does (``bnn.py``'s ``train``): holdout split, input
statistics from the training rows, a bootstrap resample per member, early stopping when no
member improved its holdout score by 1 % for ``patience`` epochs, each member's layers restored
to their best epoch, elites re-scored on the holdout rows after the restore; optional caps in
epochs and seconds. The holdout score is the one of the model's scores ``model.select_by``
names (MBPO: MSE).

Inside an epoch nothing is read back to the host; the early-stopping decision reads one small
tensor per epoch. Every minibatch step has the same shapes (the last, partial minibatch of an
epoch is padded with rows of weight 0, so it trains on bnn.py's rows with bnn.py's mean): with
``compile`` the step is one compiled graph, and on CUDA with ``graphs`` one CUDA graph replay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor

from mbrl import collectives
from mbrl.clock import clock
from mbrl.compiled import Compiled
from mbrl.config import ModelConfig
from mbrl.models.dynamics import DynamicsModel
from mbrl.models.fit_step import FitProgress, FitStep, minibatches
from mbrl.models.model_registry import build_model
from mbrl.optim import AMP_DTYPES, GuardedStep, adam, autocast

# (epoch, the holdout score logged at the fit's end as model/holdout_<criterion>, were it to
# end now: the mean best score of the members that would be the elites, raw target units)
EpochHook = Callable[[int, float], None]


def _finite_rows(inputs: Tensor, target: Tensor) -> tuple[Tensor, Tensor, int]:
    """Drop rows holding a NaN or inf (a corrupt transition must not poison the input
    statistics); returns the rest and how many were dropped. One host read per fit."""
    ok = torch.isfinite(inputs).all(-1) & torch.isfinite(target).all(-1)
    dropped = int(ok.numel()) - int(ok.sum())  # sync-ok: once per fit
    if dropped:
        keep = ok.nonzero().squeeze(1)
        inputs, target = inputs[keep], target[keep]
    return inputs, target, dropped


def holdout_rows(n: int, cfg: ModelConfig) -> int:
    """The rows a fit on ``n`` transitions holds out: ``holdout_ratio`` of them, at least one,
    at most ``max_holdout`` (MBPO's split; the time-left estimate counts the rest)."""
    return max(1, min(int(n * cfg.holdout_ratio), cfg.max_holdout))


class ModelTrainer:
    def __init__(
        self,
        model: DynamicsModel,
        cfg: ModelConfig,
        amp: str = "off",
        compile: bool = False,
        graphs: bool = False,
    ) -> None:
        """``compile``: the minibatch loss (and its backward) through torch.compile;
        ``graphs`` (CUDA): each minibatch step as one CUDA graph replay."""
        self.model, self.cfg = model, cfg
        shared = model.ensemble.shared  # (WorldModel.shared: no member dimension)
        # Best-epoch snapshots cover the per-member parameters; shared ones keep their last value.
        self._members = [p for n, p in model.ensemble.named_parameters() if n not in shared]
        if any(p.shape[0] != cfg.members for p in self._members):
            raise ValueError("every per-member density parameter needs a leading member dim")
        self.opt = adam(model.ensemble.parameters(), cfg.lr, cfg.weight_decay, decoupled=True)
        self.amp_dtype = AMP_DTYPES[amp]
        self.scaler = torch.amp.GradScaler(model.device.type, enabled=amp == "fp16")
        self._step = GuardedStep(self.opt, self.scaler)  # a non-finite batch is skipped
        self.fits = 0
        self.reinits = 0  # fresh starts after non-finite weights, all fits so far
        self._train_rows = 0
        # One optimizer step per minibatch: eager, compiled, or one CUDA graph replay.
        self.step = FitStep(model, self._step, self._autocast, compile, graphs)
        self.paused: FitProgress | None = None  # a fit stopped between two epochs (Ctrl-C)

    @property
    def paused_row_epochs(self) -> int:
        """Training rows x epochs a paused fit has run so far (0: none is paused): work the
        process that paused it timed, and the one that resumes it did not (``mbrl.runtime.eta``)."""
        fit = self.paused
        return 0 if fit is None else int(fit.train_idx.shape[0]) * fit.epoch

    @property
    def nonfinite_steps(self) -> Tensor:
        """Minibatch steps skipped for a non-finite loss, all fits so far (a device tensor)."""
        return self._step.skipped

    def warm_up(self) -> Compiled | None:
        """Compile the minibatch step now (on copies; see :meth:`FitStep.warm_up`)."""
        return self.step.warm_up(self.cfg.members, self.cfg.batch_size)

    def _autocast(self) -> AbstractContextManager[Any]:
        return autocast(self.model.device, self.amp_dtype)

    def fit(
        self,
        obs: Tensor,
        act: Tensor,
        next_obs: Tensor,
        rew: Tensor,
        generator: torch.Generator,
        on_epoch: EpochHook | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> dict[str, Any] | None:
        """Fit on N real transitions ([N, ...] device tensors). Rows holding a non-finite
        value are left out and counted; a model whose weights went non-finite is initialised
        afresh first (counted). ``on_epoch(epoch, holdout score as logged)`` runs after each
        epoch. Returns ``model/*`` metrics; None when ``stop()`` said so after an epoch: the
        fit is then paused (its state is in :meth:`state_dict`) and the next call with the
        same data goes on from that epoch."""
        x, y, fit = self.prepare(obs, act, next_obs, rew, generator)
        start = clock() - fit.seconds
        if not self._train(x, y, fit, generator, on_epoch, stop):
            self.paused = fit
            return None
        self.paused = None
        return self.report(x, y, fit, start)

    def prepare(
        self, obs: Tensor, act: Tensor, next_obs: Tensor, rew: Tensor, generator: torch.Generator
    ) -> tuple[Tensor, Tensor, FitProgress]:
        """A fit's start on N real transitions: the finite rows, the holdout split, the
        normalisers refit, each member's bootstrap resample (or a paused fit's, as it was).
        Returns the normalised inputs and model targets [N, ...] and the fit's progress."""
        model = self.model
        inputs, target = torch.cat([obs, act], -1), model.targets(obs, next_obs, rew)
        if self.paused is None:
            self._reinit_if_nonfinite()
            inputs, target, dropped = _finite_rows(inputs, target)
            train_idx, hold_idx = self._split(inputs.shape[0], generator)
            model.fit_normalizers(inputs[train_idx], target[train_idx])  # as MBPO: training rows
            # Bootstrap: each member its own resample (with replacement) of the training rows.
            n, dev = train_idx.shape[0], inputs.device
            draw = torch.randint(0, n, (self.cfg.members, n), generator=generator, device=dev)
            fit = FitProgress(train_idx, hold_idx, train_idx[draw], dropped)
        else:  # (a paused fit: the same rows, split and resamples)
            inputs, target, _ = _finite_rows(inputs, target)
            fit = self.paused
        self._train_rows = fit.train_idx.shape[0]
        return model.in_norm(inputs), model.out_norm(target), fit

    def report(self, x: Tensor, y: Tensor, fit: FitProgress, start: float) -> dict[str, Any]:
        """A finished fit (its members at their best epochs): the elites, and its metrics."""
        hold = fit.hold_idx
        metrics = self._finish(x[hold], y[hold], fit.train_loss, fit.epoch, start)
        return metrics | {"model/nonfinite_rows": fit.dropped, "model/reinits": self.reinits}

    def _train(
        self,
        x: Tensor,
        y: Tensor,
        fit: FitProgress,
        gen: torch.Generator,
        on_epoch: EpochHook | None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Epochs until early stopping (or a cap); each member ends at its best epoch. False:
        ``stop()`` paused the fit after an epoch (``fit`` holds where it is)."""
        if fit.best is None:
            fit.best = torch.full((self.cfg.members,), float("inf"), device=x.device)
            fit.snapshot = [p.detach().clone() for p in self._members]
        start, hold_idx = clock() - fit.seconds, fit.hold_idx
        while True:
            fit.train_loss = self._epoch(x, y, fit.boot, gen)
            fit.epoch += 1
            # (Several ranks: the mean over their holdout rows, so that all stop together.)
            hold = collectives.mean(self.holdout_score(x[hold_idx], y[hold_idx]))
            best = fit.best
            improved = (best - hold) / best.abs().clamp_min(1e-8) > self.cfg.improvement
            improved |= torch.isinf(best) & torch.isfinite(hold)
            fit.best = torch.where(improved, hold, best)
            self._keep_improved(fit.snapshot, improved)
            # The one host read of the epoch: did any member improve, and the mean best score.
            read = torch.stack([improved.any().float(), self._shown_score(fit.best)])
            any_improved, score = read.tolist()  # sync-ok: once per epoch (early stopping)
            fit.stale = 0 if any_improved else fit.stale + 1
            fit.seconds = clock() - start
            if on_epoch is not None:
                on_epoch(fit.epoch, score)
            if self.done(fit.epoch, fit.stale, start):
                break
            if stop is not None and stop():
                return False
        self._restore(fit.snapshot)
        return True

    def _shown_score(self, best: Tensor) -> Tensor:
        """The elites-to-be's mean best holdout score in the logged metric's units (raw
        targets: the NLL of standardised ones plus log|det| of the standardisation)."""
        score = torch.topk(best, self.cfg.elites, largest=False).values.mean()
        if self.cfg.select_by == "nll":
            score = score + self.model.out_norm.std.log().sum()
        return score

    @torch.no_grad()
    def _reinit_if_nonfinite(self) -> None:
        """A model whose weights hold a NaN or inf cannot recover by training (every loss is
        non-finite, every step skipped): start it afresh, with a fresh optimizer state."""
        params = list(self.model.ensemble.parameters())
        if bool(torch.stack([p.isfinite().all() for p in params]).all()):  # sync-ok: per fit
            return
        fresh = build_model(self.model.target_dim, self.model.context_dim, self.cfg)
        self.model.ensemble.load_state_dict(fresh.to(self.model.device).state_dict())
        self.opt.state.clear()
        self.step.reset()  # (a capture holds the old optimizer state)
        self.reinits += 1
        logging.getLogger(__name__).warning(
            "model weights were not finite: the dynamics model starts afresh (reinit %d)",
            self.reinits,
        )

    def _split(self, n: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        if n < 2:
            raise ValueError(f"need at least 2 transitions to fit the model, got {n}")
        perm = torch.randperm(n, generator=gen, device=self.model.device)
        n_hold = holdout_rows(n, self.cfg)
        return perm[n_hold:], perm[:n_hold]

    def _epoch(self, x: Tensor, y: Tensor, boot: Tensor, gen: torch.Generator) -> Tensor:
        """One pass over each member's bootstrap sample, in minibatches of ``batch_size``;
        returns the mean per-member train metric [()] (the flow's NLL, the Gaussian's MBPO
        loss term)."""
        e, n = boot.shape
        order = boot.gather(1, torch.argsort(torch.rand(e, n, generator=gen, device=x.device), 1))
        b = self.cfg.batch_size
        steps = collectives.min_int(-(-n // b))  # ranks take equal steps
        idx, weight = minibatches(order, b, steps)
        total = torch.zeros((), device=x.device)
        for i in range(steps):
            total = total + self.step(x, y, idx[i], weight[i])
        return total / max(steps, 1)

    @torch.no_grad()
    def holdout_score(self, x: Tensor, y: Tensor, criterion: str | None = None) -> Tensor:
        """Per-member holdout score [E] (lower is better) on normalised inputs ``x`` and model
        targets ``y``, the mean over rows of the model's score ``criterion`` (default
        ``model.select_by``), computed in chunks."""
        criterion = criterion or self.cfg.select_by
        parts = []
        for i in range(0, x.shape[0], 8192):
            with self._autocast():
                parts.append(self.model.score(criterion, x[i : i + 8192], y[i : i + 8192]))
        return torch.cat(parts, dim=1).mean(dim=1).nan_to_num(float("inf"))

    @torch.no_grad()
    def _keep_improved(self, snapshot: list[Tensor], improved: Tensor) -> None:
        # Per-member parameters have a leading member dimension: copy the improved ones only.
        for saved, p in zip(snapshot, self._members, strict=True):
            mask = improved.view(-1, *([1] * (p.dim() - 1)))
            saved.copy_(torch.where(mask, p, saved))

    @torch.no_grad()
    def _restore(self, snapshot: list[Tensor]) -> None:
        for saved, p in zip(snapshot, self._members, strict=True):
            p.copy_(saved)

    def done(self, epoch: int, stale: int, start: float) -> bool:
        """Whether a fit stops after ``epoch``: ``stale`` epochs past patience, or a cap."""
        cfg = self.cfg
        if stale > cfg.patience:
            return True
        if cfg.max_epochs is not None and epoch >= cfg.max_epochs:
            return True
        if cfg.max_seconds is None:
            return False
        return collectives.any_flag(clock() - start >= cfg.max_seconds)

    def _finish(
        self, xh: Tensor, yh: Tensor, train_loss: Tensor, epochs: int, start: float
    ) -> dict[str, Any]:
        # As bnn.py's _end_train: score the restored members again, the best become elites.
        names = type(self.model.ensemble).scores
        scores = {c: collectives.mean(self.holdout_score(xh, yh, c)) for c in names}
        best = scores[self.cfg.select_by]
        elites = torch.topk(best, self.cfg.elites, largest=False).indices.sort().values
        self.model.elites.copy_(elites)
        self.fits += 1
        if "nll" in scores:  # in raw target units [ds, r] (+ log|det| of the standardisation):
            # the same units whichever model standardises its targets
            scores["nll"] = scores["nll"] + self.model.out_norm.std.log().sum()
        return {
            "model/train_loss": train_loss,
            **{f"model/holdout_{c}": scores[c][elites].mean() for c in sorted(scores)},
            "model/epochs": epochs,
            "model/elites": self.cfg.elites,
            "model/fit_seconds": clock() - start,
            "model/holdout_rows": int(xh.shape[0]),
            "model/train_rows": int(self._train_rows),
            "model/nonfinite_steps": self._step.skipped,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "opt": self.opt.state_dict(),
            "scaler": self.scaler.state_dict(),
            "fits": self.fits,
            "reinits": self.reinits,
            "nonfinite_steps": self._step.skipped.clone(),
            "paused": None if self.paused is None else self.paused.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.opt.load_state_dict(state["opt"])
        self.step.reset()  # (a capture would hold the replaced optimizer state)
        self.scaler.load_state_dict(state["scaler"])
        self.fits = state["fits"]
        self.reinits = state.get("reinits", 0)
        self._step.skipped.copy_(state["nonfinite_steps"])
        paused = state.get("paused")
        self.paused = None if paused is None else FitProgress.from_state(paused, self.model.device)
