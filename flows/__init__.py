"""FlowMBPO, the flow side: conditional normalizing flows as generic density models.

This package must not import ``mbrl`` (flows are usable on their own).
"""

__version__ = "0.1.0"
