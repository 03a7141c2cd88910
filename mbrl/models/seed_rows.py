"""The S seeds' rows of a batched model fit (:mod:`mbrl.models.seed_fit`): each seed's
normalised inputs and targets in one tensor, its epochs' minibatches in its solo fit's order,
and its holdout rows, padded where seeds hold fewer rows than others (pads weigh 0 or sit
the step out)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from mbrl.models.fit_step import FitProgress, minibatches

HOLDOUT_CHUNK = 8192  # holdout rows scored at once (as ModelTrainer.holdout_score)


class SeedRows:
    """``fits[s]``: seed s's normalised inputs [n_s, C], model targets [n_s, D] and its fit's
    progress (split, bootstrap resamples), as :meth:`ModelTrainer.prepare` returns them."""

    def __init__(self, fits: Sequence[tuple[Tensor, Tensor, FitProgress]]) -> None:
        self.seeds, self.progress = len(fits), [f for _, _, f in fits]
        self.x, self.n = _stacked([x for x, _, _ in fits])  # seed s at rows s*n .. s*n + n_s
        self.y, _ = _stacked([y for _, y, _ in fits])
        hold = [f.hold_idx for f in self.progress]
        most = max(int(h.shape[0]) for h in hold)
        self.hold_idx = torch.stack([_pad(h, most) + s * self.n for s, h in enumerate(hold)])
        ones = [torch.ones_like(h, dtype=self.x.dtype) for h in hold]
        self.hold_weight = torch.stack([_pad(w, most, 0.0) for w in ones])  # [S, H]

    def epoch(
        self, gens: Sequence[torch.Generator], running: Sequence[bool], batch_size: int
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """An epoch's minibatches for the running seeds, each in its solo fit's order (drawn
        from its generator, only for a running seed, as its solo fit draws): row indices into
        the stacked rows and weights [steps, S, E, b], which seeds take each step [steps, S],
        and each seed's number of steps [S]."""
        dev, b = self.x.device, batch_size
        per_seed: list[tuple[Tensor, Tensor] | None] = []
        for s, (fit, gen) in enumerate(zip(self.progress, gens, strict=True)):
            if not running[s]:
                per_seed.append(None)
                continue
            boot, draw = fit.boot, torch.rand(fit.boot.shape, generator=gen, device=dev)
            order = boot.gather(1, torch.argsort(draw, 1))
            idx, weight = minibatches(order, b, -(-boot.shape[1] // b))
            per_seed.append((idx + s * self.n, weight))
        steps = torch.tensor([0 if p is None else p[0].shape[0] for p in per_seed], device=dev)
        most = max(p[0].shape[0] for p in per_seed if p is not None)
        members = self.progress[0].boot.shape[0]
        # (The steps a seed sits out read its first row; their results are masked.)
        idx = torch.arange(self.seeds, device=dev).mul(self.n).view(1, -1, 1, 1)
        idx = idx.expand(most, self.seeds, members, b).clone()
        weight = torch.ones(most, self.seeds, members, b, device=dev, dtype=self.x.dtype)
        for s, p in enumerate(per_seed):
            if p is not None:
                idx[: p[0].shape[0], s], weight[: p[0].shape[0], s] = p
        active = torch.arange(most, device=dev)[:, None] < steps[None, :]
        return idx, weight, active, steps

    def holdout(self) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
        """The seeds' holdout rows in chunks: inputs [S, h, C], targets [S, h, D], weights
        [S, h] (0 for a pad)."""
        for i in range(0, self.hold_idx.shape[1], HOLDOUT_CHUNK):
            idx = self.hold_idx[:, i : i + HOLDOUT_CHUNK]
            yield self.x[idx], self.y[idx], self.hold_weight[:, i : i + HOLDOUT_CHUNK]


def _pad(t: Tensor, n: int, value: float | None = None) -> Tensor:
    """``t`` [m] to length n, with ``value`` (default: its first entry)."""
    fill = t[:1] if value is None else torch.full_like(t[:1], value)
    return torch.cat([t, fill.expand(n - t.shape[0])])


def _stacked(parts: Sequence[Tensor]) -> tuple[Tensor, int]:
    """Seed s's rows [n_s, C] at rows s * n .. s * n + n_s of one [S * n, C] tensor (n: the
    most rows of any seed); returns it and n."""
    n = max(int(p.shape[0]) for p in parts)
    out = parts[0].new_zeros(len(parts) * n, parts[0].shape[-1])
    for s, p in enumerate(parts):
        out[s * n : s * n + p.shape[0]] = p
    return out, n
