"""The environments FlowMBPO knows: short name -> gymnasium ids (one per version) + batched
termination function."""

from __future__ import annotations

from dataclasses import dataclass

from mbrl.envs import termination
from mbrl.envs.termination import TerminationFn


@dataclass(frozen=True)
class EnvVersion:
    """One version of an env: its gymnasium id, arguments, and how many leading observation
    entries are kept (None: all)."""

    gym_id: str
    kwargs: tuple[tuple[str, object], ...] = ()  # passed to gymnasium.make
    obs_dims: int | None = None


@dataclass(frozen=True)
class EnvSpec:
    """What the rest of the code needs to know about an environment besides gymnasium itself.
    The first of ``versions`` is the default."""

    termination_fn: TerminationFn
    versions: tuple[tuple[str, EnvVersion], ...]

    @property
    def default_version(self) -> str:
        return self.versions[0][0]

    def version(self, name: str | None = None) -> EnvVersion:
        """A version by name (None: the default); a clear error for one the env lacks."""
        found = dict(self.versions)
        if name is None:
            return self.versions[0][1]
        if name not in found:
            raise KeyError(
                f"version {name!r} is not allowed for {self.gym_id}; it has: {', '.join(found)}"
            )
        return found[name]

    @property
    def gym_id(self) -> str:
        """The default version's gymnasium id."""
        return self.versions[0][1].gym_id


def _mujoco(name: str, v5: tuple[tuple[str, object], ...] = (), **v4: EnvVersion) -> tuple:
    """v5 (gymnasium's maintained version) first, then v4 (the one published MBPO curves
    compare with: docs/fidelity.md lists how v5 differs)."""
    return (("v5", EnvVersion(f"{name}-v5", v5)), ("v4", v4.get("v4", EnvVersion(f"{name}-v4"))))


ENVS: dict[str, EnvSpec] = {
    "hopper": EnvSpec(termination.hopper, _mujoco("Hopper")),
    "walker2d": EnvSpec(termination.walker2d, _mujoco("Walker2d")),
    "halfcheetah": EnvSpec(termination.never, _mujoco("HalfCheetah")),
    # Ant and Humanoid use MBPO's truncated observations (27 and 45 dims: qpos[2:], qvel): the
    # contact forces and inertia terms are omitted, as in MBPO's AntTruncatedObs /
    # HumanoidTruncatedObs. v5 has flags for them; Humanoid-v4 has none, so its observation is
    # cut to its first 45 entries, which are qpos[2:] and qvel.
    "ant": EnvSpec(
        termination.ant,
        _mujoco(
            "Ant",
            (("include_cfrc_ext_in_observation", False),),
            v4=EnvVersion("Ant-v4", (("use_contact_forces", False),)),
        ),
    ),
    "humanoid": EnvSpec(
        termination.humanoid,
        _mujoco(
            "Humanoid",
            (
                ("include_cinert_in_observation", False),
                ("include_cvel_in_observation", False),
                ("include_qfrc_actuator_in_observation", False),
                ("include_cfrc_ext_in_observation", False),
            ),
            v4=EnvVersion("Humanoid-v4", obs_dims=45),
        ),
    ),
    "inverted_pendulum": EnvSpec(termination.inverted_pendulum, _mujoco("InvertedPendulum")),
    "pendulum": EnvSpec(termination.never, (("v1", EnvVersion("Pendulum-v1")),)),
}


def env_spec(name: str) -> EnvSpec:
    """Look up an environment by its short name, with an error that lists the known ones."""
    try:
        return ENVS[name]
    except KeyError:
        raise KeyError(f"unknown env {name!r}; allowed: {', '.join(sorted(ENVS))}") from None
