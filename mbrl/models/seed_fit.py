"""S seeds' model fits as one: the model side of seeds batched in one process (docs/scaling.md,
"Seeds batched in one process").

Each seed's fit is its solo fit (:class:`~mbrl.models.training.ModelTrainer`): its rows, holdout
split, normalisers, bootstrap resamples, epoch orders (from its own generator), early stopping,
best-epoch restore and elites. What is batched is the minibatch step, which dominates a fit on
a GPU: the model's own loss (``WorldModel.loss``, unchanged) runs for all seeds at once
through ``torch.func`` (``vmap`` over the seeds of ``grad``), so each kernel launches once for
S seeds; the holdout scores of an epoch likewise.

Seeds hold different numbers of rows (MBPO commits a transition when its episode ends), so
their epochs have different numbers of minibatches, and their fits stop at different epochs.
A seed sits out the steps its solo fit would not take: one masked Adam steps all seeds'
stacked weights and leaves a masked seed's weights, moments and step count as they are (as the
solo fused Adam leaves them on a skipped, non-finite step). Between fits the seeds' own models
and optimizers hold everything: a fit copies them in and, at its end, out again, so each
seed's checkpoint is a solo run's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from flows.nn import ReLU
from mbrl.clock import clock
from mbrl.compiled import Compiled, GraphedStep, what_ran
from mbrl.models.fit_step import FitProgress
from mbrl.models.seed_rows import SeedRows
from mbrl.models.training import ModelTrainer
from mbrl.optim import autocast

Status = Callable[[str], None]


class _Calls(nn.Module):
    """The world model's ``loss`` and ``score`` as one module's forward, so that
    ``functional_call`` runs them on one seed's weights."""

    def __init__(self, ensemble: nn.Module) -> None:
        super().__init__()
        self.ensemble = ensemble

    def forward(self, what: str, *args: Any) -> Any:
        return getattr(self.ensemble, what)(*args)


class SeedFits:
    """The fits of S seeds' dynamics models (``trainers``, one per seed, configured alike)."""

    def __init__(
        self, trainers: Sequence[ModelTrainer], compile: bool = False, graphs: bool = False
    ) -> None:
        """``compile``: the seeds' vmapped loss and its backward through ``torch.compile``;
        ``graphs`` (CUDA): each minibatch step as one CUDA graph replay for all seeds."""
        _check_alike(trainers)
        self.trainers, first = list(trainers), trainers[0]
        self.seeds, self.cfg, self.device = len(trainers), first.cfg, first.model.device
        self.amp_dtype, self.graphs = first.amp_dtype, graphs
        self._calls = _Calls(copy.deepcopy(first.model.ensemble))  # holds no seed's weights
        for module in self._calls.modules():  # (vmap cannot run its compiled custom backward)
            if isinstance(module, ReLU):
                module.from_output = False
        shared = first.model.ensemble.shared
        self.names = [n for n, _ in self._calls.named_parameters()]  # ("ensemble." + name)
        self.member_names = [n for n in self.names if n.removeprefix("ensemble.") not in shared]
        # Every seed's weights and Adam moments, stacked [S, ...] (copied in at each fit).
        ps = dict(self._calls.named_parameters())
        self.params = {n: ps[n].detach().expand(self.seeds, *ps[n].shape).clone() for n in ps}
        self.exp_avg = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.exp_avg_sq = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.steps = torch.zeros(self.seeds, device=self.device)  # each seed's Adam steps
        self.skipped = torch.zeros(self.seeds, dtype=torch.long, device=self.device)
        group = first.opt.param_groups[0]
        self.lr, self.betas, self.eps = group["lr"], group["betas"], group["eps"]
        self.weight_decay = group["weight_decay"]  # (decoupled: AdamW, as the solo fit)
        grads = vmap(grad(self._loss, has_aux=True))
        self.compiled = Compiled(grads, "the batched model fit") if compile else None
        self._grads = grads if self.compiled is None else self.compiled
        self._graphed: GraphedStep[Tensor] | None = None
        self._inputs: dict[str, Tensor] = {}  # a graphed step's fixed inputs

    # --- one seed's functions (vmapped over the seeds) ------------------------------------

    def _loss(
        self, params: dict[str, Tensor], x: Tensor, y: Tensor, w: Tensor
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """One seed's loss on its minibatch, and (that loss, its per-member metric) as aux."""
        with autocast(self.device, self.amp_dtype):
            loss, per_member = functional_call(self._calls, params, ("loss", x, y, w))
        return loss, (loss.detach(), per_member.detach())

    def _score(
        self, params: dict[str, Tensor], x: Tensor, y: Tensor, mean: Tensor, std: Tensor, name: str
    ) -> Tensor:
        """One seed's holdout score ``name`` per member and row [E, H]."""

        def raw(t: Tensor) -> Tensor:  # (its out_norm.inverse)
            return t * std + mean

        with autocast(self.device, self.amp_dtype):
            out: Tensor = functional_call(self._calls, params, ("score", name, x, y, raw))
        return out

    # --- the minibatch step ------------------------------------------------------------------

    def train(self, xb: Tensor, yb: Tensor, weight: Tensor, active: Tensor) -> Tensor:
        """One step for the seeds in ``active`` [S] on rows ``xb`` [S, E, b, C], ``yb``
        [S, E, b, D] with row weights [S, E, b]; each seed's mean per-member metric [S]."""
        grads, (loss, metric) = self._grads(self.params, xb, yb, weight)
        finite = torch.isfinite(loss)
        self.skipped += active & ~finite
        self._adam(grads, active & finite)
        return metric.mean(-1)

    @torch.no_grad()
    def _adam(self, grads: dict[str, Tensor], step: Tensor) -> None:
        """torch's AdamW for the seeds in ``step`` [S]; the others keep their weights, moments
        and step counts (a step count per seed: their fits take different numbers of steps)."""
        (b1, b2), lr = self.betas, self.lr
        count = self.steps + step
        self.steps.copy_(count)
        t = count.clamp_min(1)  # (a seed that never stepped is masked out below)
        step_size, bc2_sqrt = lr / (1 - torch.pow(b1, t)), (1 - torch.pow(b2, t)).sqrt()
        for name, p in self.params.items():
            shape = (self.seeds,) + (1,) * (p.dim() - 1)
            g, m, v, keep = grads[name], self.exp_avg[name], self.exp_avg_sq[name], step.view(shape)
            m_new = torch.lerp(m, g.to(m.dtype), 1 - b1)
            v_new = v * b2 + (1 - b2) * g * g
            denom = v_new.sqrt() / bc2_sqrt.view(shape) + self.eps
            p_new = p * (1 - lr * self.weight_decay) - step_size.view(shape) * m_new / denom
            m.copy_(torch.where(keep, m_new, m))
            v.copy_(torch.where(keep, v_new, v))
            p.copy_(torch.where(keep, p_new, p))

    def _step(self, x: Tensor, y: Tensor, idx: Tensor, weight: Tensor, active: Tensor) -> Tensor:
        """The step on rows ``idx`` [S, E, b] of the seeds' rows ``x`` [S * n, C] (seed s's
        offset by s * n), eager or as one CUDA graph replay."""
        shape = (*idx.shape, -1)
        if not self.graphs:
            return self.train(x[idx].view(shape), y[idx].view(shape), weight, active)
        if self._graphed is None:
            s = self._inputs = {
                "x": x[idx].view(shape),
                "y": y[idx].view(shape),
                "w": weight.clone(),
                "a": active.clone(),
            }
            self._graphed = GraphedStep(
                lambda: self.train(s["x"], s["y"], s["w"], s["a"]),
                [],
                self.device,
                "the batched fit step",
            )
        s = self._inputs
        torch.index_select(x, 0, idx.flatten(), out=s["x"].view(-1, x.shape[-1]))
        torch.index_select(y, 0, idx.flatten(), out=s["y"].view(-1, y.shape[-1]))
        s["w"].copy_(weight)
        s["a"].copy_(active)
        return self._graphed()

    # --- a fit ---------------------------------------------------------------------------------

    def fit(
        self,
        data: Sequence[dict[str, Tensor]],
        generators: Sequence[torch.Generator],
        status: Status | None = None,
    ) -> list[dict[str, Any]]:
        """Fit every seed's model on its real transitions ``data[s]`` (D_env's rows), with its
        generator; each seed's ``model/*`` metrics, as its solo fit returns them."""
        if len(data) != self.seeds or len(generators) != self.seeds:
            raise ValueError(f"{len(data)} data and {len(generators)} generators for {self.seeds}")
        paused = [s for s, t in enumerate(self.trainers) if t.paused is not None]
        if paused:
            raise ValueError(
                f"seed {paused[0]}'s checkpoint holds a paused model fit: resume that run alone "
                "past its fit first (batched fits are never paused)"
            )
        fits = [
            t.prepare(d["obs"], d["act"], d["next_obs"], d["rew"], g)
            for t, d, g in zip(self.trainers, data, generators, strict=True)
        ]
        start = clock()
        self._copy_in()
        self._epochs(fits, generators, start, status)
        self._copy_out()
        return [
            t.report(x, y, fit, start) for t, (x, y, fit) in zip(self.trainers, fits, strict=True)
        ]

    def _epochs(
        self,
        fits: list[tuple[Tensor, Tensor, FitProgress]],
        gens: Sequence[torch.Generator],
        start: float,
        status: Status | None,
    ) -> None:
        """Epochs until every seed's fit has stopped (its own early stopping, or a cap); each
        seed's members end at their best epochs. Reads S flags from the device per epoch."""
        cfg, dev = self.cfg, self.device
        rows = SeedRows(fits)
        best = torch.full((self.seeds, cfg.members), float("inf"), device=dev)
        snapshot = {n: self.params[n].clone() for n in self.member_names}
        running = [True] * self.seeds
        stale = [0] * self.seeds
        train_loss = torch.zeros(self.seeds, device=dev)
        while any(running):
            fitting = torch.tensor(running, device=dev)
            idx, weight, active, steps = rows.epoch(gens, running, cfg.batch_size)
            total = torch.zeros(self.seeds, device=dev)
            for i in range(idx.shape[0]):
                metric = self._step(rows.x, rows.y, idx[i], weight[i], active[i])
                total = total + torch.where(active[i], metric, 0.0)
            train_loss = torch.where(fitting, total / steps.clamp_min(1), train_loss)
            score = self._holdout(rows)
            improved = (best - score) / best.abs().clamp_min(1e-8) > cfg.improvement
            improved = (improved | (torch.isinf(best) & torch.isfinite(score))) & fitting[:, None]
            best = torch.where(improved, score, best)
            for name, saved in snapshot.items():
                keep = improved.view(*improved.shape, *([1] * (saved.dim() - 2)))
                saved.copy_(torch.where(keep, self.params[name], saved))
            any_improved = improved.any(1).tolist()  # sync-ok: once per epoch (early stopping)
            for s, (t, (_, _, fit)) in enumerate(zip(self.trainers, fits, strict=True)):
                if running[s]:
                    fit.epoch += 1
                    stale[s] = 0 if any_improved[s] else stale[s] + 1
                    running[s] = not t.done(fit.epoch, stale[s], start)
            if status is not None:
                epoch = max(f.epoch for _, _, f in fits)
                status(f"model fit: epoch {epoch}, {sum(running)} of {self.seeds} seeds fitting")
        with torch.no_grad():
            for name, saved in snapshot.items():
                self.params[name].copy_(saved)
        for s, (_, _, fit) in enumerate(fits):
            fit.train_loss = train_loss[s]

    @torch.no_grad()
    def _holdout(self, rows: SeedRows) -> Tensor:
        """Each seed's per-member holdout score [S, E] (ModelTrainer.holdout_score's)."""
        norms = [t.model.out_norm for t in self.trainers]
        mean, std = torch.stack([n.mean for n in norms]), torch.stack([n.std for n in norms])
        score = vmap(self._score, in_dims=(0, 0, 0, 0, 0, None))
        total = torch.zeros(self.seeds, self.cfg.members, device=self.device)
        for x, y, weight in rows.holdout():
            per_row = score(self.params, x, y, mean, std, self.cfg.select_by)
            total += (per_row * weight[:, None, :]).sum(-1)
        return (total / rows.hold_weight.sum(1, keepdim=True)).nan_to_num(float("inf"))

    # --- the seeds' own models and optimizers ------------------------------------------------

    @torch.no_grad()
    def _copy_in(self) -> None:
        """Each seed's weights, Adam moments and counts into the stacked tensors."""
        for s, t in enumerate(self.trainers):
            state = t.opt.state
            for name, p in _Calls(t.model.ensemble).named_parameters():
                self.params[name][s].copy_(p)
                st = state.get(p)
                if not st:  # (an optimizer that has not stepped yet)
                    self.exp_avg[name][s].zero_(), self.exp_avg_sq[name][s].zero_()
                    self.steps[s] = 0.0
                    continue
                self.exp_avg[name][s].copy_(st["exp_avg"])
                self.exp_avg_sq[name][s].copy_(st["exp_avg_sq"])
                self.steps[s] = st["step"]
            self.skipped[s] = t.nonfinite_steps

    @torch.no_grad()
    def _copy_out(self) -> None:
        """The stacked tensors back into each seed's weights and optimizer (its checkpoint is
        then a solo run's)."""
        for s, t in enumerate(self.trainers):
            group = t.opt.param_groups[0]
            on_device = group["fused"] or group["capturable"]  # (where torch keeps "step")
            for name, p in _Calls(t.model.ensemble).named_parameters():
                p.copy_(self.params[name][s])
                step = self.steps[s].to(p.device if on_device else "cpu", torch.float32)
                t.opt.state[p] = {
                    "step": step.clone(),
                    "exp_avg": self.exp_avg[name][s].clone(),
                    "exp_avg_sq": self.exp_avg_sq[name][s].clone(),
                }
            t.nonfinite_steps.copy_(self.skipped[s])

    # --- what a run reads --------------------------------------------------------------------

    @property
    def ran(self) -> str:
        """What the steps ran (as :attr:`FitStep.ran`)."""
        return what_ran(self.compiled, self.graphs, self._graphed)

    @property
    def replays(self) -> int:
        """Steps served by a replay of the current CUDA graph."""
        return 0 if self._graphed is None else self._graphed.replays

    def reset(self) -> None:
        """Forget the CUDA graph (as :meth:`FitStep.reset`; a seed's optimizer state was
        replaced). A capture that failed is not tried again."""
        if self._graphed is not None and self._graphed.failure is None:
            self._graphed = None

    def warm_up(self) -> Compiled | None:
        """Compile now, on a copy and random rows (the seeds' models are left as they were)."""
        if self.compiled is None:
            return None
        twin = copy.copy(self)
        twin.graphs, twin._graphed = False, None
        for part in ("params", "exp_avg", "exp_avg_sq"):
            setattr(twin, part, {n: p.clone() for n, p in getattr(self, part).items()})
        twin.steps, twin.skipped = self.steps.clone(), self.skipped.clone()
        m = self.trainers[0].model
        shape = (self.seeds, self.cfg.members, self.cfg.batch_size)
        x = torch.randn(*shape, m.context_dim, device=self.device)
        y = torch.randn(*shape, m.target_dim, device=self.device)
        w, a = torch.ones(shape, device=self.device), torch.ones(self.seeds, dtype=torch.bool)
        self.compiled.warm_up(lambda: twin.train(x, y, w, a.to(self.device)))
        return self.compiled


def _check_alike(trainers: Sequence[ModelTrainer]) -> None:
    """One model kind at one size and device, fp32 or bf16: a clear error before any work."""
    if not trainers:
        raise ValueError("batched fits need at least one seed's model")
    first = trainers[0]
    for i, t in enumerate(trainers):
        m = t.model
        if type(m.ensemble) is not type(first.model.ensemble) or t.cfg != first.cfg:
            raise ValueError(f"seed {i}'s model is not configured as seed 0's")
        if (m.target_dim, m.context_dim, m.device) != (
            first.model.target_dim,
            first.model.context_dim,
            first.model.device,
        ):
            raise ValueError(f"seed {i}'s model has other sizes or another device than seed 0's")
    if first.scaler.is_enabled():
        raise ValueError("amp=fp16 is not supported for batched seeds; use amp=bf16 or amp=off")
