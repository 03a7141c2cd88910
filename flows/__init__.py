"""FlowMBPO, the flow side: conditional normalizing flows as generic density models.

This package must not import ``mbrl`` (flows are usable on their own).

One flow, p(y | context) as a ``torch.distributions.Distribution``:

>>> import torch
>>> flow = ConditionalFlow(dim=2, context_dim=4, layers=2)
>>> y, context = torch.randn(5, 2), torch.randn(5, 4)
>>> loss = -flow(context).log_prob(y).mean()   # maximum likelihood
>>> loss.backward()
>>> flow(context).sample().shape
torch.Size([5, 2])

An ensemble of E such flows in one batched module (a leading member dimension):

>>> flows = EnsembleConditionalFlow(members=3, dim=2, context_dim=4, layers=2)
>>> dist = flows(context)                    # one context batch shared by all members
>>> dist.sample().shape, dist.log_prob(y).shape
(torch.Size([3, 5, 2]), torch.Size([3, 5]))
>>> isinstance(dist, torch.distributions.Distribution)
True
"""

from flows.defaults import TRANSFORMS
from flows.flow import ConditionalFlow, EnsembleConditionalFlow, FlowDistribution
from flows.nn import EnsembleLinear, EnsembleMLP

__all__ = [
    "TRANSFORMS",
    "ConditionalFlow",
    "EnsembleConditionalFlow",
    "EnsembleLinear",
    "EnsembleMLP",
    "FlowDistribution",
]
__version__ = "0.1.0"
