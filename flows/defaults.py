"""A flow's default architecture, stated once: the keyword defaults of the flows
(``flow.py``, ``coupled.py``) and the flow config keys of ``mbrl`` (``model.flow.*``,
``rewarder.flow.*``) read these values."""

from __future__ import annotations

from dataclasses import dataclass

TRANSFORMS = ("spline", "affine")  # coupling layers: rational-quadratic spline, affine


@dataclass(frozen=True)
class FlowDefaults:
    """The sizes and kind of a flow unless told otherwise."""

    transform: str = "spline"  # spline (rational-quadratic) | affine coupling layers
    layers: int = 4  # coupling layers, a fixed permutation between them
    hidden: tuple[int, ...] = (128, 128)  # each coupling's conditioner
    bins: int = 8  # spline bins
    tail_bound: float = 4.0  # spline on [-B, B] (normalised units), identity outside
    embed_hidden: tuple[int, ...] = (200, 200)  # the context network
    embed_dim: int = 128  # context features shared by the base layer and every coupling


DEFAULTS = FlowDefaults()
