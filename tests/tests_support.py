"""Small configs shared by the tests, and typed views of networks' layers."""

from __future__ import annotations

from typing import cast

from flows.nn import EnsembleLinear, EnsembleMLP
from mbrl.config import ModelConfig
from mbrl.models import model_config
from mbrl.models.flow import FlowArchConfig

TINY_FLOW = FlowArchConfig(layers=2, hidden=[32], embed_hidden=[32], embed_dim=32)


def tiny_model_config(name: str = "flow", **kw: object) -> ModelConfig:
    """``model=<name>`` with small networks (MLP models: two hidden layers of 32)."""
    if name == "flow":
        kw.setdefault("flow", TINY_FLOW)
    else:
        kw.setdefault("hidden", [32, 32])
    if name == "gaussian":  # three L2 coefficients: MBPO's first, second and last
        kw.setdefault("l2", [2.5e-5, 5e-5, 1e-4])
    return model_config(name, **kw)


def ensemble_linears(net: EnsembleMLP) -> list[EnsembleLinear]:
    """``net.layers`` as a list (an EnsembleMLP's layers are all EnsembleLinear)."""
    return cast(list[EnsembleLinear], list(net.layers))
