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
    kwargs: tuple[tuple[str, object], ...] = ()  # passed to gymnasium.make


ENVS: dict[str, EnvSpec] = {
    "hopper": EnvSpec("Hopper-v5", termination.hopper),
    "walker2d": EnvSpec("Walker2d-v5", termination.walker2d),
    "halfcheetah": EnvSpec("HalfCheetah-v5", termination.never),
    # Ant and Humanoid use MBPO's truncated observations (27 and 45 dims): the contact forces
    # and inertia terms are omitted, as in MBPO's AntTruncatedObs / HumanoidTruncatedObs.
    "ant": EnvSpec("Ant-v5", termination.ant, (("include_cfrc_ext_in_observation", False),)),
    "humanoid": EnvSpec(
        "Humanoid-v5",
        termination.humanoid,
        (
            ("include_cinert_in_observation", False),
            ("include_cvel_in_observation", False),
            ("include_qfrc_actuator_in_observation", False),
            ("include_cfrc_ext_in_observation", False),
        ),
    ),
    "inverted_pendulum": EnvSpec("InvertedPendulum-v5", termination.inverted_pendulum),
    "pendulum": EnvSpec("Pendulum-v1", termination.never),
}


def env_spec(name: str) -> EnvSpec:
    """Look up an environment by its short name, with an error that lists the known ones."""
    try:
        return ENVS[name]
    except KeyError:
        raise KeyError(f"unknown env {name!r}; allowed: {', '.join(sorted(ENVS))}") from None
