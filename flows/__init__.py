"""FlowMBPO, the flow side: conditional normalizing flows as generic density models.

This package must not import ``mbrl`` (flows are usable on their own).

>>> import torch
>>> flow = EnsembleConditionalFlow(members=3, dim=2, context_dim=4, layers=2)
>>> dist = flow(torch.randn(5, 4))          # one context batch shared by all members
>>> dist.sample().shape, dist.log_prob(torch.randn(5, 2)).shape
(torch.Size([3, 5, 2]), torch.Size([3, 5]))
"""

from flows.flow import TRANSFORMS, EnsembleConditionalFlow, FlowDistribution
from flows.nn import EnsembleLinear, EnsembleMLP

__all__ = [
    "TRANSFORMS",
    "EnsembleConditionalFlow",
    "EnsembleLinear",
    "EnsembleMLP",
    "FlowDistribution",
]
__version__ = "0.1.0"
