"""The environments FlowMBPO knows, each one :func:`register_env` call: its short name, its
gymnasium ids (one per version), its batched termination function (``termination.py``), its
run length and MBPO's settings for it. The call makes ``env=<name>`` a hydra choice and
MBPO's settings the ``algorithm_env/mbpo_<name>`` node, applied when ``algorithm=mbpo`` runs on
that env (docs/model.md: adding an env)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from mbrl.envs import termination
from mbrl.envs.costs import mbpo_ant_contact_cost, mbpo_humanoid_contact_cost
from mbrl.envs.termination import TerminationFn
from mbrl.registry import Registry


@dataclass(frozen=True)
class EnvVersion:
    """One version of an env: its gymnasium id, arguments, how many leading observation
    entries are kept (None: all), and a contact cost its reward lacks (None: none)."""

    gym_id: str
    kwargs: tuple[tuple[str, object], ...] = ()  # passed to gymnasium.make
    obs_dims: int | None = None
    # MjData after a step -> a cost subtracted from that step's reward (mbrl/envs/costs.py)
    contact_cost: Callable[[Any], float] | None = None


@dataclass(frozen=True)
class EnvSpec:
    """What the rest of the code needs to know about an environment besides gymnasium itself.
    The first of ``versions`` is the default."""

    termination_fn: TerminationFn
    versions: tuple[tuple[str, EnvVersion], ...]
    total_steps: int  # a run's default length (MBPO's envs: the x-range of the paper's curve)
    about: str = ""  # what the docs' table of envs says of it
    # algorithm -> its settings on this env (config keys, nested), applied when both are chosen
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)

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


# env=<name> -> its spec (register_env); an unknown name is a KeyError, as a dict's
ENVS: Registry[EnvSpec] = Registry("env", "an env", KeyError)


def register_env(
    name: str,
    termination_fn: TerminationFn,
    versions: tuple[tuple[str, EnvVersion], ...],
    *,
    total_steps: int,
    about: str = "",
    **settings: dict[str, Any],
) -> EnvSpec:
    """Make ``env=<name>`` a choice: the env's ``termination_fn`` and ``versions`` (the first
    is the default), its run length ``total_steps``, the docs' note ``about`` it, and each
    algorithm's settings for it (``mbpo=mbpo_settings(...)``: the config keys, nested, that
    ``algorithm=mbpo`` takes on this env)."""
    spec = ENVS.register(name, EnvSpec(termination_fn, versions, total_steps, about, settings))
    store = ConfigStore.instance()
    env_node = {"env": {"name": name}, "total_steps": total_steps}
    store.store(group="env", name=name, node=env_node, package="_global_")
    for algorithm, values in settings.items():
        store.store(
            group="algorithm_env", name=f"{algorithm}_{name}", node=values, package="_global_"
        )
    return spec


@dataclass(frozen=True, kw_only=True)
class RolloutSchedule:
    """MBPO's rollout length schedule (the config's ``rollout.*`` keys of the same names):
    ``min_length`` up to epoch ``min_epoch``, then linear to ``max_length`` at ``max_epoch``,
    epochs counted after the random steps (mbrl/schedule.py)."""

    min_epoch: int
    max_epoch: int
    min_length: int
    max_length: int


def mbpo_settings(
    *,
    updates_per_step: int,
    target_entropy: float,
    schedule: RolloutSchedule,
    model_train_freq: int | None = None,
    retain_epochs: int | None = None,
) -> dict[str, Any]:
    """MBPO's row for one env (``examples/config/<env>.py``) as config keys: SAC updates per
    env step, the target entropy, the rollout schedule, and where the env's config sets them,
    env steps between model fits and epochs of rollouts kept (None: the config's default).
    The 5000 initial random steps are ``examples/development/base.py``'s. docs/fidelity.md
    lists each value."""
    out: dict[str, Any] = {
        "algorithm": {"init_steps": 5000, "updates_per_step": updates_per_step},
        "agent": {"target_entropy": target_entropy},
        "rollout": asdict(schedule),
    }
    if retain_epochs is not None:
        out["rollout"]["retain_epochs"] = retain_epochs
    if model_train_freq is not None:
        out["mbpo"] = {"model_train_freq": model_train_freq}
    return out


def small_mbpo(init_steps: int) -> dict[str, Any]:
    """Small MBPO settings that learn in minutes on a CPU (not MBPO's): a model phase every
    250 steps, 10 SAC updates per step, 10% real rows, 10k rollouts of fixed length 5, fits
    capped at 30 epochs (an epoch cap, not a time cap: runs stay reproducible)."""
    fixed = RolloutSchedule(min_epoch=0, max_epoch=0, min_length=5, max_length=5)
    return {
        "algorithm": {"init_steps": init_steps, "updates_per_step": 10},
        "model": {"max_epochs": 30},
        "mbpo": {"model_train_freq": 250, "real_ratio": 0.1, "epoch_length": 1000},
        "rollout": asdict(fixed) | {"batch_size": 10000},
    }


def env_spec(name: str) -> EnvSpec:
    """Look up an environment by its short name, with an error that lists the known ones."""
    return ENVS.lookup(name)


SMALL_SAC = {"algorithm": {"init_steps": 1000}}  # model-free SAC on a small env: 1000 random steps

register_env(
    "hopper",
    termination.hopper,
    _mujoco("Hopper"),
    total_steps=125_000,
    mbpo=mbpo_settings(
        updates_per_step=20,
        target_entropy=-1,
        schedule=RolloutSchedule(min_epoch=20, max_epoch=150, min_length=1, max_length=15),
    ),
)
register_env(
    "walker2d",
    termination.walker2d,
    _mujoco("Walker2d"),
    total_steps=300_000,
    mbpo=mbpo_settings(
        updates_per_step=20,
        target_entropy=-3,
        schedule=RolloutSchedule(min_epoch=20, max_epoch=150, min_length=1, max_length=1),
    ),
)
register_env(
    "halfcheetah",
    termination.never,
    _mujoco("HalfCheetah"),
    total_steps=400_000,
    mbpo=mbpo_settings(
        updates_per_step=40,
        target_entropy=-3,
        schedule=RolloutSchedule(min_epoch=20, max_epoch=150, min_length=1, max_length=1),
    ),
)
# Ant and Humanoid use MBPO's truncated observations (27 and 45 dims: qpos[2:], qvel): the
# contact forces and inertia terms are omitted, as in MBPO's AntTruncatedObs /
# HumanoidTruncatedObs. v5 has flags for them; Humanoid-v4 has none, so its observation is
# cut to its first 45 entries, which are qpos[2:] and qvel.
# Their rewards subtract a contact cost, as MBPO's own envs (mbpo/env/ant.py, humanoid.py) do:
# MuJoCo 1.50, which MBPO ran on, fills cfrc_ext at every step. v5 charges the same costs
# itself; v4 as built here charges none, so make_env subtracts MBPO's (mbrl/envs/costs.py).
# (Ant-v4's use_contact_forces=True would charge Ant's but append the 84 forces to the
# observation returned by the env's own _get_obs, and report the cost as reward_ctrl.)
register_env(
    "ant",
    termination.ant,
    _mujoco(
        "Ant",
        (("include_cfrc_ext_in_observation", False),),
        v4=EnvVersion(
            "Ant-v4", (("use_contact_forces", False),), contact_cost=mbpo_ant_contact_cost
        ),
    ),
    total_steps=300_000,
    about="MBPO's truncated observation (no contact forces)",
    mbpo=mbpo_settings(
        updates_per_step=20,
        target_entropy=-4,
        schedule=RolloutSchedule(min_epoch=20, max_epoch=100, min_length=1, max_length=25),
    ),
)
register_env(
    "humanoid",
    termination.humanoid,
    _mujoco(
        "Humanoid",
        (
            ("include_cinert_in_observation", False),
            ("include_cvel_in_observation", False),
            ("include_qfrc_actuator_in_observation", False),
            ("include_cfrc_ext_in_observation", False),
        ),
        v4=EnvVersion("Humanoid-v4", obs_dims=45, contact_cost=mbpo_humanoid_contact_cost),
    ),
    total_steps=300_000,
    about="MBPO's truncated observation (qpos[2:], qvel)",
    # examples/config/humanoid/0.py on master, whose schedule ends at 25 since commit 7ffb5e4
    # (the Gaussian ensemble's width, 400, is in conf/model_env/gaussian_humanoid.yaml)
    mbpo=mbpo_settings(
        updates_per_step=20,
        target_entropy=-2,
        schedule=RolloutSchedule(min_epoch=20, max_epoch=300, min_length=1, max_length=25),
        model_train_freq=1000,
        retain_epochs=5,
    ),
)
register_env(
    "inverted_pendulum",
    termination.inverted_pendulum,
    _mujoco("InvertedPendulum"),
    total_steps=15_000,
    about="a run takes minutes on a CPU",
    mbpo=small_mbpo(500),
    sac=SMALL_SAC,
)
register_env(
    "pendulum",
    termination.never,
    (("v1", EnvVersion("Pendulum-v1")),),
    total_steps=15_000,
    about="200-step episodes; a run takes minutes on a CPU",
    mbpo=small_mbpo(1000),
    sac=SMALL_SAC,
)
