"""The flow world model (``model=flow``, the default): an ensemble of conditional coupling
flows (``flows.EnsembleConditionalFlow``), fit by maximum likelihood on standardised targets;
early stopping and elites on holdout NLL (a density model judged by its density;
``model.select_by=mse`` judges its mode, as MBPO judges its Gaussian's mean)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from flows import EnsembleConditionalFlow
from flows.defaults import DEFAULTS as FLOW
from flows.defaults import TRANSFORMS
from mbrl.config import FlowConfig, ModelConfig
from mbrl.models.model_registry import register_model
from mbrl.models.protocol import ToRaw
from mbrl.models.scores import density_score, weighted_mean


@dataclass
class FlowArchConfig(FlowConfig):
    """The flow world model's architecture (flows.EnsembleConditionalFlow)."""

    # context network
    embed_hidden: list[int] = field(default_factory=lambda: list(FLOW.embed_hidden))
    # context features shared by the base layer and every coupling
    embed_dim: int = FLOW.embed_dim


@dataclass
class FlowModelConfig(ModelConfig):
    """``model=flow``: the common keys at the flow's defaults, and its architecture."""

    _target_: str = "mbrl.models.flow.FlowModel"
    name: str = "flow"
    flow: FlowArchConfig = field(default_factory=FlowArchConfig)

    def check(self) -> str | None:
        f = self.flow
        if f.transform not in TRANSFORMS:
            return f"model.flow.transform={f.transform!r}: choose one of {', '.join(TRANSFORMS)}"
        if min(f.bins, f.embed_dim, *f.hidden, *f.embed_hidden) < 1 or f.layers < 0:
            return (
                f"model.flow: bins={f.bins}, embed_dim={f.embed_dim}, hidden={f.hidden}, "
                f"embed_hidden={f.embed_hidden}, layers={f.layers}: need widths and bins >= 1, "
                "layers >= 0"
            )
        if not f.tail_bound > 0:
            return f"model.flow.tail_bound={f.tail_bound} is not allowed; it must be > 0"
        return None


class FlowModel(EnsembleConditionalFlow):
    """p([ds, r] | s, a) per member; ``model(x, members)`` is a distribution over them."""

    config = FlowModelConfig
    scores = ("nll", "mse")
    shared = ()  # (every parameter has a member dimension)

    def __init__(self, dim: int, context_dim: int, cfg: FlowModelConfig) -> None:
        f = cfg.flow
        super().__init__(
            cfg.members,
            dim,
            context_dim,
            layers=f.layers,
            transform=f.transform,
            hidden=f.hidden,
            bins=f.bins,
            tail_bound=f.tail_bound,
            embed_hidden=f.embed_hidden,
            embed_dim=f.embed_dim,
        )

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
        """The members' mean negative log-likelihoods, summed (and each, [E])."""
        nll = -weighted_mean(self(x).log_prob(y), weight)
        return nll.sum(), nll

    def score(self, name: str, x: Tensor, y: Tensor, raw: ToRaw) -> Tensor:
        return density_score(name, self(x), y, raw)

    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        out: Tensor = self(x, members).sample(generator=generator)
        return out


register_model("flow", FlowModelConfig)
