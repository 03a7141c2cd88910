"""MBPO's probabilistic ensemble (Chua et al. 2018; MBPO's ``mbpo/models/bnn.py``).

Each member is an MLP with swish (SiLU) hidden layers whose output is a diagonal Gaussian.
What makes it MBPO's and not just "a Gaussian ensemble":

- weights drawn from a normal truncated at two standard deviations, std ``1 / (2 sqrt(in))``,
  biases zero (``fc.py``);
- the log-variance soft bounds ``max_logvar`` / ``min_logvar`` (initial 0.5 and -10) are one
  pair **shared by all members** and trained with them;
- the training loss (:meth:`GaussianEnsemble.loss`) per member is the mean over rows *and
  output dims* of ``(mean - y)^2 / var + log var``, summed over members, plus each layer's L2
  term ``l2_i * ||W_i||^2 / 2`` (``tf.nn.l2_loss``) and ``0.01 * (sum max_logvar - sum
  min_logvar)``;
- raw targets (inputs standardised only), no decoupled weight decay, early stopping and
  elites on the holdout mean squared error of the mean.

``model(context, members)`` returns a distribution with ``log_prob``, ``rsample``/``sample``
and ``mode`` over a leading member dimension, as the flow's does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from flows.nn import EnsembleLinear, EnsembleMLP
from mbrl.config import ModelConfig
from mbrl.models.model_registry import register_model
from mbrl.models.protocol import ToRaw
from mbrl.models.scores import density_score

_LOG_2PI = math.log(2 * math.pi)
# MBPO's construct_model: L2 coefficients of its 4 hidden layers and the output layer.
MBPO_L2 = (2.5e-5, 5e-5, 7.5e-5, 7.5e-5, 1e-4)
LOGVAR_BOUND_WEIGHT = 0.01  # bnn.py: 0.01 * sum(max_logvar) - 0.01 * sum(min_logvar)


@dataclass
class GaussianConfig(ModelConfig):
    """``model=gaussian``: MBPO's probabilistic ensemble and MBPO's way of fitting it."""

    _target_: str = "mbrl.models.gaussian.GaussianEnsemble"
    name: str = "gaussian"
    weight_decay: float = 0.0  # (its decay is MBPO's L2 term in the loss: l2)
    select_by: str = "mse"
    normalize_targets: bool = False  # MBPO standardises the inputs only
    hidden: list[int] = field(default_factory=lambda: [200, 200, 200, 200])  # MLP per member
    l2: list[float] | None = None  # per-layer L2 coefficients in the loss; null: MBPO's MBPO_L2

    @property
    def l2_coefs(self) -> list[float]:
        return list(MBPO_L2 if self.l2 is None else self.l2)

    def check(self) -> str | None:
        """What is wrong with these values, or None."""
        layers, coefs = len(self.hidden) + 1, self.l2_coefs
        if len(coefs) != layers or min(coefs) < 0:
            given = "MBPO's 5 values (model.l2=null)" if self.l2 is None else f"model.l2={self.l2}"
            return (
                f"{given} does not fit model.hidden={self.hidden}: the Gaussian MLP has {layers} "
                f"layers, so model.l2 needs {layers} coefficients >= 0"
            )
        return None


class GaussianEnsemble(nn.Module):
    config = GaussianConfig
    scores = ("mse", "nll")
    # Parameters without a member dimension: best-epoch snapshots leave them alone (bnn.py's
    # _save_state / _set_state cover the layers' weights and biases only).
    shared = ("max_logvar", "min_logvar")

    def __init__(self, dim: int, context_dim: int, cfg: GaussianConfig) -> None:
        super().__init__()
        self.members, self.dim = cfg.members, dim
        self.net = EnsembleMLP(cfg.members, context_dim, cfg.hidden, 2 * dim, act=nn.SiLU)
        self.l2 = tuple(cfg.l2_coefs)
        if len(self.l2) != len(self.net.layers):
            raise ValueError(f"l2 needs one coefficient per layer ({len(self.net.layers)})")
        self.max_logvar = nn.Parameter(torch.full((1, dim), 0.5))
        self.min_logvar = nn.Parameter(torch.full((1, dim), -10.0))
        self.reset_parameters()

    @property
    def linears(self) -> list[EnsembleLinear]:
        return [m for m in self.net.layers if isinstance(m, EnsembleLinear)]

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """``tf.truncated_normal_initializer(stddev=1 / (2 sqrt(in)))``, zero biases."""
        for layer in self.linears:
            std = 1.0 / (2.0 * math.sqrt(layer.in_dim))
            nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
            layer.bias.zero_()

    def forward(self, context: Tensor, members: Tensor | None = None) -> GaussianDistribution:
        """context: [B, C] (shared) or [E', B, C]."""
        if context.dim() == 2:
            n = self.members if members is None else int(members.shape[0])
            context = context.expand(n, *context.shape)
        # (Under autocast EnsembleMLP's output layer runs in fp32: means, log-variances.)
        mean, raw = self.net(context, members).chunk(2, dim=-1)
        hi, lo = self.max_logvar, self.min_logvar
        logvar = hi - nn.functional.softplus(hi - raw)
        logvar = lo + nn.functional.softplus(logvar - lo)
        return GaussianDistribution(mean, logvar)

    def loss(
        self, context: Tensor, y: Tensor, weight: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """bnn.py's training loss on a minibatch ``context`` [E, b, C], ``y`` [E, b, D]; the
        mean over rows is over those of ``weight`` [E, b] 1 (padding rows: 0), if given.

        Returns (the loss to minimise, the per-member Gaussian term [E])."""
        dist = self(context)
        per_row = ((dist.mean - y).square() * torch.exp(-dist.logvar) + dist.logvar).mean(-1)
        if weight is None:
            per_member = per_row.mean(1)
        else:
            per_member = (per_row * weight).sum(1) / weight.sum(1)
        decay = torch.zeros((), device=y.device)
        for coef, layer in zip(self.l2, self.linears, strict=True):
            decay = decay + coef * 0.5 * layer.weight.square().sum()  # tf.nn.l2_loss
        return per_member.sum() + decay + self.regularizer(), per_member

    def regularizer(self) -> Tensor:
        """The log-variance bound term alone (weight 0.01, as bnn.py)."""
        return LOGVAR_BOUND_WEIGHT * (self.max_logvar.sum() - self.min_logvar.sum())

    def score(self, name: str, x: Tensor, y: Tensor, raw: ToRaw) -> Tensor:
        """``mse`` of the mean (bnn.py's holdout score), or ``nll``."""
        return density_score(name, self(x), y, raw)

    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        return self(x, members).sample(generator=generator)


class GaussianDistribution:
    """Diagonal Gaussians; batch shape [E', B], event shape [dim]."""

    def __init__(self, mean: Tensor, logvar: Tensor) -> None:
        self.mean, self.logvar = mean, logvar
        self.batch_shape = mean.shape[:-1]

    def log_prob(self, y: Tensor) -> Tensor:
        """y: [B, D] or [E', B, D] -> [E', B]."""
        inv_var = torch.exp(-self.logvar)
        return -0.5 * ((y - self.mean).square() * inv_var + self.logvar + _LOG_2PI).sum(-1)

    def rsample(
        self, sample_shape: Sequence[int] = (), generator: torch.Generator | None = None
    ) -> Tensor:
        shape = (*sample_shape, *self.mean.shape)
        noise = torch.randn(shape, generator=generator, device=self.mean.device)
        return self.mean + torch.exp(0.5 * self.logvar) * noise

    @torch.no_grad()
    def sample(
        self, sample_shape: Sequence[int] = (), generator: torch.Generator | None = None
    ) -> Tensor:
        return self.rsample(sample_shape, generator)

    @property
    def mode(self) -> Tensor:
        return self.mean


register_model("gaussian", GaussianConfig)
