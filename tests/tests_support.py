"""Small configs shared by the tests."""

from __future__ import annotations

from mbrl.config import FlowModelConfig, ModelConfig

TINY_FLOW = FlowModelConfig(layers=2, hidden=[32], embed_hidden=[32], embed_dim=32)


def tiny_model_config(name: str = "flow", **kw: object) -> ModelConfig:
    # Two hidden layers: three L2 coefficients for the Gaussian (MBPO's first, second, last).
    kw.setdefault("l2", [2.5e-5, 5e-5, 1e-4] if name == "gaussian" else None)
    return ModelConfig(name=name, hidden=[32, 32], flow=TINY_FLOW, **kw)  # type: ignore[arg-type]
