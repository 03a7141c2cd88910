"""Per-dimension standardisation whose statistics live in the module's state dict."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from mbrl import collectives


class Normalizer(nn.Module):
    """x -> (x - mean) / std, refit on the training rows at every model fit (as MBPO's
    ``TensorStandardScaler``: population std, a std below 1e-12 replaced by 1)."""

    mean: Tensor
    std: Tensor

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    @torch.no_grad()
    def fit(self, x: Tensor) -> None:
        """x: [N, dim]. Constant dimensions keep std 1 instead of dividing by ~0 (statistics
        in float64, where a constant column's std is exactly 0)."""
        x64 = x.double()
        if collectives.active():  # the statistics of every rank's rows together
            mean, std = collectives.pooled_moments(x64)
        else:
            mean, std = x64.mean(dim=0), x64.std(dim=0, correction=0)
        self.mean.copy_(mean)
        self.std.copy_(torch.where(std < 1e-12, torch.ones_like(std), std))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std

    def inverse(self, x: Tensor) -> Tensor:
        return x * self.std + self.mean
