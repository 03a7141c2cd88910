"""The environments FlowMBPO knows: short name -> gymnasium id + batched termination function."""

from __future__ import annotations

from dataclasses import dataclass

from mbrl.envs import termination
from mbrl.envs.termination import TerminationFn


@dataclass(frozen=True)
class EnvSpec:
    """What the rest of the code needs to know about an environment besides gymnasium itself."""

    gym_id: str
    termination_fn: TerminationFn


ENVS: dict[str, EnvSpec] = {
    "hopper": EnvSpec("Hopper-v5", termination.hopper),
    "walker2d": EnvSpec("Walker2d-v5", termination.walker2d),
    "halfcheetah": EnvSpec("HalfCheetah-v5", termination.never),
    "ant": EnvSpec("Ant-v5", termination.ant),
    "humanoid": EnvSpec("Humanoid-v5", termination.humanoid),
    "inverted_pendulum": EnvSpec("InvertedPendulum-v5", termination.inverted_pendulum),
    "pendulum": EnvSpec("Pendulum-v1", termination.never),
}


def env_spec(name: str) -> EnvSpec:
    """Look up an environment by its short name, with an error that lists the known ones."""
    try:
        return ENVS[name]
    except KeyError:
        raise KeyError(f"unknown env {name!r}; allowed: {', '.join(sorted(ENVS))}") from None
