"""Every config key accounted for against MBPO: a key added to FlowMBPO's config fails here
until it is put in :data:`KEYS` as MBPO's setting (its value checked against MBPO's), as
FlowMBPO's own with the default at which it leaves MBPO's algorithm as it is, as a difference
docs/fidelity.md states, or as one that decides how a run is run and recorded, not what it
learns. So "every setting is MBPO's unless docs/fidelity.md says otherwise" holds for keys
not written yet too (a new key's default that changed the algorithm would pass every test
that checks only the keys it knows)."""

from __future__ import annotations

import os

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mbrl.launch import register_resolvers
from mbrl.tools.plotting import flat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MBPO, ENV, OFF, WITH, DIFFERS, RUN, MODEL = "mbpo", "env", "off", "with", "differs", "run", "model"
ANY = object()  # (no default to check: the key acts only through another, or not on learning)

# key: (kind, value). MBPO: MBPO's shared setting (softlearning's SAC via MBPO's
# examples/development/base.py; the model fit: mbpo/models/bnn.py, constructor.py), the value
# at env=hopper model=gaussian. ENV: MBPO's, per env (examples/config/<env>.py), checked for
# every env by tests/test_fidelity.py::test_env_settings_are_mbpos. OFF: FlowMBPO's own, MBPO's
# algorithm at this value. WITH: acts only when the key named in the comment is changed.
# DIFFERS: a difference kept on purpose, which docs/fidelity.md names. RUN: how a run is run,
# recorded or resumed (device placement and speed that compute the same math included).
KEYS: dict[str, tuple[str, object]] = {
    "env.name": (RUN, ANY),  # (the env chosen)
    "env.version": (DIFFERS, ANY),  # gymnasium's v5 (v4: env.version=v4); MBPO's gym v2
    "env.max_episode_steps": (MBPO, None),  # None: the env's own 1000, MBPO's max_path_length
    "env.num_envs": (OFF, 1),  # MBPO steps one env (docs/fidelity.md, "Scaling out")
    "env.vector": (RUN, ANY),  # how several copies step (with env.num_envs > 1)
    "algorithm.name": (MBPO, "mbpo"),
    "algorithm.init_steps": (ENV, ANY),
    "algorithm.updates_per_step": (ENV, ANY),
    "agent._target_": (MBPO, "mbrl.agents.sac.SAC"),
    "agent.batch_size": (MBPO, 256),
    "agent.act_device": (DIFFERS, ANY),  # (a GPU run acts with a CPU copy of the actor)
    "agent.act_sync_every": (DIFFERS, ANY),
    "agent.hidden_sizes": (MBPO, [256, 256]),
    "agent.actor_lr": (MBPO, 3e-4),
    "agent.critic_lr": (MBPO, 3e-4),
    "agent.alpha_lr": (MBPO, 3e-4),
    "agent.gamma": (MBPO, 0.99),
    "agent.tau": (MBPO, 5e-3),
    "agent.init_alpha": (MBPO, 1.0),  # log alpha initialised to 0
    "agent.autotune": (MBPO, True),
    "agent.target_entropy": (ENV, ANY),
    "agent.log_std_mode": (MBPO, "clip"),  # clip_by_value
    "agent.log_std_min": (MBPO, None),  # None: the mode's own, clip's -20
    "agent.log_std_max": (MBPO, 2.0),
    "agent.init": (MBPO, "glorot"),  # Keras Dense's defaults
    "buffer.capacity": (MBPO, 1_000_000),  # SimpleReplayPool's max_size
    "eval.every": (DIFFERS, ANY),
    "eval.episodes": (DIFFERS, ANY),
    "eval.vector": (RUN, ANY),
    "logger.tensorboard": (RUN, ANY),
    "logger.every": (RUN, ANY),
    "logger.progress": (RUN, ANY),
    "logger.wandb": (RUN, ANY),
    "logger.wandb_project": (RUN, ANY),
    "logger.wandb_entity": (RUN, ANY),
    "logger.wandb_group": (RUN, ANY),
    "logger.wandb_tags": (RUN, ANY),
    "logger.wandb_name": (RUN, ANY),
    "logger.wandb_mode": (RUN, ANY),
    "checkpoint.snapshots": (RUN, ANY),
    "checkpoint.buffer_in_snapshots": (RUN, ANY),
    "checkpoint.pool": (OFF, True),  # (false: a resume refills the pool: not the same run)
    "model._target_": (MBPO, "mbrl.models.gaussian.GaussianEnsemble"),
    "model.name": (MBPO, "gaussian"),
    "model.members": (MBPO, 7),
    "model.elites": (MBPO, 5),
    "model.lr": (MBPO, 1e-3),
    "model.weight_decay": (MBPO, 0.0),  # (the Gaussian's decay is constructor.py's L2)
    "model.select_by": (MBPO, "mse"),
    "model.normalize_targets": (MBPO, False),
    "model.batch_size": (MBPO, 256),
    "model.holdout_ratio": (MBPO, 0.2),
    "model.max_holdout": (MBPO, 5000),
    "model.patience": (MBPO, 5),
    "model.improvement": (MBPO, 0.01),
    "model.max_epochs": (ENV, ANY),
    "model.max_seconds": (MBPO, None),  # max_model_t=None
    "model.hidden": (ENV, ANY),
    "model.l2": (MBPO, None),  # None: constructor.py's per-layer coefficients
    "rollout.min_epoch": (ENV, ANY),
    "rollout.max_epoch": (ENV, ANY),
    "rollout.min_length": (ENV, ANY),
    "rollout.max_length": (ENV, ANY),
    "rollout.batch_size": (ENV, ANY),
    "rollout.retain_epochs": (ENV, ANY),
    "mbpo.model_train_freq": (ENV, ANY),
    "mbpo.real_ratio": (ENV, ANY),
    "mbpo.epoch_length": (ENV, ANY),
    "mbpo.real_data": (MBPO, "episode"),  # SimpleSampler adds whole paths
    "rewarder.mode": (OFF, "none"),  # the coupled-flow rewarder, FlowMBPO's own
    "rewarder.penalty": (WITH, ANY),  # rewarder.mode
    "rewarder.threshold": (WITH, ANY),
    "rewarder.flow.transform": (WITH, ANY),
    "rewarder.flow.layers": (WITH, ANY),
    "rewarder.flow.hidden": (WITH, ANY),
    "rewarder.flow.bins": (WITH, ANY),
    "rewarder.flow.tail_bound": (WITH, ANY),
    "rewarder.lr": (WITH, ANY),
    "rewarder.steps": (WITH, ANY),
    "rewarder.batch_size": (WITH, ANY),
    "profile.enabled": (OFF, False),  # a profiling window, not a training run
    "profile.updates": (WITH, ANY),  # profile.enabled
    "profile.model_epochs": (WITH, ANY),
    "profile.eval_episodes": (WITH, ANY),
    "profile.top_ops": (WITH, ANY),
    "profile.trace": (WITH, ANY),
    "total_steps": (ENV, ANY),
    "seed": (RUN, ANY),
    "device": (DIFFERS, ANY),  # (device=cuda: the GPU path's arithmetic and acting)
    "amp": (DIFFERS, ANY),
    "compile": (RUN, ANY),  # the same losses, fused (docs/fidelity.md, "Precision")
    "tf32": (DIFFERS, ANY),
    "threads": (RUN, ANY),
    "flush_denormal": (RUN, ANY),  # (values below ~1e-38 as 0 on a CPU: speed, not learning)
    "resume": (RUN, ANY),
    "max_minutes": (RUN, ANY),
    "batch_seeds": (OFF, 1),  # one seed per process (more: each its own run, batched)
    "batch_dirs": (WITH, ANY),  # batch_seeds
    "plugins": (RUN, ANY),
}
# The model's own keys, where it is not MBPO's Gaussian (docs/fidelity.md has a section on
# each): MODEL, a choice of that model, named in its section; the rest of KEYS holds for it.
GAUSSIAN_ONLY = ("model._target_", "model.name", "model.hidden", "model.l2")
FLOW = ("transform", "layers", "hidden", "bins", "tail_bound", "embed_hidden", "embed_dim")
MODELS: dict[str, dict[str, tuple[str, object]]] = {
    "gaussian": {},
    "flow": {
        "model._target_": (MODEL, ANY),
        "model.name": (MODEL, ANY),
        "model.weight_decay": (DIFFERS, ANY),
        "model.select_by": (DIFFERS, ANY),
        "model.normalize_targets": (DIFFERS, ANY),
        **{f"model.flow.{k}": (MODEL, ANY) for k in FLOW},
    },
    "deterministic": {
        "model._target_": (MODEL, ANY),
        "model.name": (MODEL, ANY),
        "model.weight_decay": (DIFFERS, ANY),
        "model.normalize_targets": (MODEL, ANY),
        "model.hidden": (MODEL, ANY),
    },
}


def table(model: str) -> dict[str, tuple[str, object]]:
    """:data:`KEYS` for ``model=<model>``."""
    base = (
        KEYS if model == "gaussian" else {k: v for k, v in KEYS.items() if k not in GAUSSIAN_ONLY}
    )
    return {**base, **MODELS[model]}


def _keys(*overrides: str) -> dict[str, object]:
    """``scripts/train.py <overrides>``'s config, every key dotted, as hydra composes it."""
    register_resolvers()  # (and the env, model and agent groups, as train.py has them)
    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        return flat(OmegaConf.to_container(compose("config", overrides=list(overrides))))


def problems(keys: dict[str, object], model: str = "gaussian") -> list[str]:
    """What :func:`table` does not account for in ``keys`` (a composed config's), a line each."""
    known = table(model)
    out = [
        f"{key}: accounted for nowhere. Put it in KEYS (tests/test_config_keys.py): MBPO's "
        "value, FlowMBPO's own with the default that leaves MBPO's algorithm as it is, or a "
        "difference docs/fidelity.md states"
        for key in sorted(set(keys) - set(known))
    ]
    out += [f"{key}: in KEYS, not in the config" for key in sorted(set(known) - set(keys))]
    with open(os.path.join(ROOT, "docs", "fidelity.md"), encoding="utf-8") as f:
        fidelity = f.read()
    for key, (kind, value) in known.items():
        if key in keys and kind in (MBPO, OFF) and keys[key] != value:
            why = f"MBPO's is {value!r}" if kind == MBPO else f"MBPO's loop is MBPO's at {value!r}"
            out.append(f"{key} defaults to {keys[key]!r}; {why}: a default that changes MBPO's "
                       "algorithm is a difference docs/fidelity.md states")  # fmt: skip
        if kind == DIFFERS and f"`{key}" not in fidelity:
            out.append(f"{key}: a difference docs/fidelity.md does not name")
        if kind == MODEL and f"(`model={model}`" not in fidelity:
            out.append(f"{key}: model={model}'s own, and docs/fidelity.md has no section on it")
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_config_key_is_mbpos_or_said_to_be_ours(model: str) -> None:
    assert problems(_keys("env=hopper", f"model={model}"), model) == []


def test_every_per_env_key_is_one_the_env_test_compares_with_mbpos() -> None:
    """Each ENV key, changed, changes what test_env_settings_are_mbpos compares with MBPO's
    per-env values (so none of them goes unchecked)."""
    from test_fidelity import _ours, composed

    base = _ours(composed("env=hopper", "model=gaussian"))
    keys = _keys("env=hopper", "model=gaussian")
    for key in (k for k, (kind, _) in KEYS.items() if kind == ENV):
        changed = _ours(composed("env=hopper", "model=gaussian", f"{key}={_other(keys[key])}"))
        assert changed != base, f"{key}: per env, but test_env_settings_are_mbpos leaves it out"


def _other(value: object) -> str:
    """Another valid value than ``value``, as a hydra override writes it."""
    if value is None:
        return "10"
    if isinstance(value, bool):
        return str(not value).lower()
    if isinstance(value, int):
        return str(value + 1)
    if isinstance(value, float):
        return str(value / 2)
    assert isinstance(value, list)
    return "[" + ",".join(str(v // 2) for v in value) + "]"


def test_a_new_or_changed_key_is_caught() -> None:
    """The check fails on what it is for: a key added with a default that would change the
    algorithm (a penalty on the model's rewards, say), and a changed default of MBPO's."""
    keys = _keys("env=hopper", "model=gaussian", "+rollout.penalty=0.5", "model.lr=3e-4")
    found = problems(keys)
    assert len(found) == 2, found
    assert found[0].startswith("rollout.penalty: accounted for nowhere")
    assert found[1].startswith("model.lr defaults to 0.0003; MBPO's is 0.001")
    flow = problems(_keys("env=hopper", "+model.flow.noise=0.1"), "flow")  # (a flow-only key)
    assert len(flow) == 1 and flow[0].startswith("model.flow.noise: accounted for nowhere"), flow
