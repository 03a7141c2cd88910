"""Contact costs that an env version's reward lacks but MBPO's own envs charge.

MBPO trains Ant and Humanoid on envs of its own (``mbpo/env/ant.py``, ``humanoid.py``) on
MuJoCo 1.50, whose ``mj_step`` fills ``data.cfrc_ext`` (the external, i.e. contact, forces on
each body); their rewards subtract a cost on those forces. Gymnasium's v4 envs as configured
here charge none (Humanoid-v4 has no contact cost; Ant-v4 only with ``use_contact_forces``,
which also appends the forces to the observation), though gymnasium fills ``cfrc_ext`` (it
calls ``mj_rnePostConstraint`` after each step). So ``EnvVersion(contact_cost=...)`` names one
of these and ``make_env`` subtracts it from each step's reward (reported as
``info["reward_contact"]``, as v5 reports its own). Each takes the env's ``MjData`` after the
step. v5 charges the same costs itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def mbpo_ant_contact_cost(data: Any) -> float:
    """MBPO's AntTruncatedObsEnv: ``contact_cost = 0.5 * 1e-3 * sum(square(clip(cfrc_ext, -1,
    1)))`` (Ant-v4's with ``use_contact_forces=True``, and Ant-v5's: weight 5e-4, range ±1)."""
    return 0.5e-3 * float(np.square(np.clip(data.cfrc_ext, -1.0, 1.0)).sum())


def mbpo_humanoid_contact_cost(data: Any) -> float:
    """MBPO's HumanoidTruncatedObsEnv: ``quad_impact_cost = min(.5e-6 * square(cfrc_ext).sum(),
    10)`` (Humanoid-v5's ``contact_cost_weight=5e-7``, capped at 10, is the same term)."""
    return min(0.5e-6 * float(np.square(data.cfrc_ext).sum()), 10.0)
