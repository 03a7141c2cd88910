"""FlowMBPO, the RL side: envs, buffers, SAC, the training loop, logging and checkpoints."""

__version__ = "0.1.0"
