"""Config validation: bad values fail with a message naming the value and the choices."""

from __future__ import annotations

import os
from typing import cast

import pytest
from omegaconf import OmegaConf

from mbrl.config import Config, ConfigError
from mbrl.launch import resolve
from mbrl.runtime.validate import schema_for, validate


def _cfg(**overrides: object) -> dict[str, object]:
    base = OmegaConf.to_container(schema_for(None))
    assert isinstance(base, dict)
    for dotted, value in overrides.items():
        node = base
        *parents, leaf = dotted.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return cast(dict[str, object], base)  # (a config's keys are names)


def test_defaults_are_valid() -> None:
    cfg = validate(_cfg())
    assert isinstance(cfg, Config) and cfg.env.name == "hopper" and cfg.agent.batch_size == 256


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"env__name": "nonexistent"}, "env='nonexistent' is not allowed; choose one of: ant, "),
        ({"total_steps": -5}, "total_steps=-5 is not allowed; it must be a positive number"),
        ({"device": "tpu"}, "device='tpu' is not allowed; choose one of: auto, cpu, cuda"),
        ({"amp": "fp8"}, "amp='fp8' is not allowed; choose one of: auto, off, bf16, fp16"),
        ({"eval__every": 0}, "eval.every=0"),
        ({"eval__episodes": 0}, "eval.episodes=0"),
        ({"algorithm__name": "ppo"}, "algorithm='ppo' is not allowed; choose one of: sac, mbpo"),
        ({"agent__gamma": 1.5}, "agent.gamma=1.5"),
        ({"agent__hidden_sizes": []}, "agent.hidden_sizes"),
        ({"compile": "maybe"}, "compile='maybe' is not allowed; choose one of: auto, true, false"),
        (
            {"env__version": "v3"},
            "env.version='v3' is not allowed for env=hopper; its versions are: v5, v4 (null: v5)",
        ),
        ({"buffer__capacity": 0}, "buffer.capacity=0"),
        ({"resume": "/nonexistent/run"}, "no checkpoint at /nonexistent/run/ckpt/last.pt"),
        ({"model___target_": "mbrl.models.maf.MAF"}, "model._target_='mbrl.models.maf.MAF' cannot"),
        ({"model__select_by": "mse"}, None),
        ({"model__select_by": "crps"}, "model.select_by='crps' is not allowed with model=flow"),
        ({"model__elites": 9}, "model.elites=9 is not allowed; it must be <= model.members=7"),
        ({"rollout__max_length": -1}, "rollout.max_length=-1"),
        (
            {"rollout__min_length": 5, "rollout__max_length": 2},
            "rollout.max_length=2 is below rollout.min_length=5",
        ),
        ({"mbpo__real_ratio": 1.5}, "mbpo.real_ratio=1.5"),
        ({"rewarder__mode": "bonus"}, "rewarder.mode='bonus' is not allowed; choose one of: none"),
        ({"model__flow__transform": "maf"}, "model.flow.transform='maf'"),
        ({"max_minutes": 0}, "max_minutes=0 is not allowed; it must be > 0 or null"),
        ({"max_minutes": 0.5}, None),
        ({"logger__wandb_mode": "ofline"}, "logger.wandb_mode='ofline' is not allowed; choose"),
        ({"logger__wandb_mode": "offline"}, None),
        (
            {"rollout__min_length": 5, "rollout__max_length": 1},
            "rollout.max_length=1 is below rollout.min_length=5; the rollout length goes from",
        ),
        (
            {"rollout__min_epoch": 200, "rollout__max_epoch": 150},
            "e.g. rollout.min_epoch=150 rollout.max_epoch=150",
        ),
    ],
)
def test_bad_values_name_value_and_choices(
    overrides: dict[str, object], message: str | None
) -> None:
    if message is None:  # (a neighbouring value that is allowed)
        validate(_cfg(**overrides))
        return
    with pytest.raises(ConfigError) as info:
        validate(_cfg(**overrides))
    assert message in str(info.value)


def test_unknown_key_and_wrong_type_are_reported() -> None:
    bad = _cfg()
    bad["totl_steps"] = 5
    with pytest.raises(ConfigError, match="totl_steps"):
        validate(bad)
    with pytest.raises(ConfigError, match="total_steps"):
        validate(_cfg(total_steps="many"))


@pytest.mark.parametrize(
    ("path", "hint"),
    [
        ("rollout.max_lenght", "did you mean rollout.max_length?"),  # (a typo: its own node)
        ("algorithm.real_ratio", "did you mean mbpo.real_ratio?"),  # (a key of another node)
        ("agent.retain_epoch", "did you mean rollout.retain_epochs?"),  # (both)
        ("model.lernrate", "allowed here: _target_,"),  # (nothing close: no guess)
    ],
)
def test_an_unknown_key_names_the_closest_one_anywhere(path: str, hint: str) -> None:
    from mbrl.runtime.validate import check_key, schema_for

    with pytest.raises(ConfigError) as info:
        check_key(path, schema_for(None))
    assert hint in str(info.value)
    assert ("did you mean" in str(info.value)) == hint.startswith("did you mean")


def test_cuda_request_without_cuda_fails_early(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"device='cuda'.*no CUDA device"):
        validate(_cfg(device="cuda"))


def test_resuming_a_run_of_an_older_version_says_so(tmp_path: str) -> None:
    run = os.path.join(str(tmp_path), "run")
    os.makedirs(run)
    old = OmegaConf.create({"algorithm": {"name": "sac", "learning_starts": 100}})
    OmegaConf.save(old, os.path.join(run, "config.yaml"))
    with pytest.raises(ConfigError, match="nothing was saved yet in this run"):
        resolve(OmegaConf.create({"resume": run}), [])  # (no checkpoint: that comes first)
    os.makedirs(os.path.join(run, "ckpt"))
    with open(os.path.join(run, "ckpt", "last.pt"), "wb") as f:
        f.write(b"(read later, when the checkpoint is loaded)")
    with pytest.raises(ConfigError, match="written by another version of FlowMBPO"):
        resolve(OmegaConf.create({"resume": run}), [])


def test_a_resume_names_the_settings_it_changed_not_its_own_limits() -> None:
    """Every changed learning setting, nested ones by their dotted key; the process's own
    limits (total_steps, max_minutes, threads, ...) are a resume's to change."""
    from dataclasses import asdict, replace

    from mbrl.config import RESUME_OWN, changed_settings

    saved = Config()
    now = replace(
        saved,
        total_steps=saved.total_steps + 1,
        max_minutes=3.0,
        threads=2,
        mbpo=replace(saved.mbpo, real_ratio=0.5),
        rollout=replace(saved.rollout, max_length=saved.rollout.max_length + 1),
    )
    assert {"total_steps", "max_minutes", "threads"} <= set(RESUME_OWN)
    assert changed_settings(asdict(saved), asdict(now)) == [
        f"rollout.max_length {saved.rollout.max_length} -> {saved.rollout.max_length + 1}",
        f"mbpo.real_ratio {saved.mbpo.real_ratio} -> 0.5",
    ]
    assert changed_settings(asdict(saved), asdict(replace(saved, total_steps=1))) == []
