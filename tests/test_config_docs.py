"""Defaults are stated once (mbrl/config.py; a model's or agent's own keys in its file; a
flow's architecture in flows/flow.py, which the config reads): the generated reference, the
README's table and the config groups agree with it."""

from __future__ import annotations

import os
import re

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from mbrl.envs import ENVS
from mbrl.tools.config_reference import defaults, markdown, sections

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_docs_config_md_is_generated_from_the_dataclasses() -> None:
    assert _read("docs", "config.md") == markdown(), "run python scripts/config_table.py"


def test_every_key_has_a_meaning_in_the_reference() -> None:
    keys, envs = markdown().split("\n## Environments")
    envs = envs.split("\n## ")[0]  # (the table of envs, not the settings per env after it)
    rows = [line for line in keys.splitlines() if line.startswith("| `")]
    named = [line.split("`")[1] for line in envs.splitlines() if line.startswith("| `")]
    assert named == ["env=", *ENVS]  # (the header, then a row per registered env)
    own = sum(len(rows) for *_, rows in sections())  # each built-in model's and agent's own
    assert len(rows) == len(defaults()) + own
    assert not [r for r in rows if r.endswith("|  |")], "a config field without a comment"


def test_the_settings_per_env_are_what_a_run_on_the_env_gets() -> None:
    """Each cell of docs/config.md's settings per env is the value the composed config holds
    with that algorithm on that env (hydra, as scripts/train.py composes it)."""
    text = markdown().split("\n## Settings per env")[1]
    checked = 0
    for block in text.split("\n### `algorithm=")[1:]:
        algorithm = block.split("`")[0]
        lines = block.splitlines()
        envs = [cell.strip("|` ") for cell in lines[2].split(" | ")[1:]]  # (the header)
        rows = [line.split(" | ") for line in lines if line.startswith("| `")]
        for env in envs:
            cfg = _composed(f"algorithm={algorithm}", f"env={env}")
            for row in rows:
                key, value = row[0].strip("|` "), row[1 + envs.index(env)].strip("| ")
                if value:
                    assert OmegaConf.select(cfg, key) == yaml.safe_load(value), (env, key)
                    checked += 1
    registered = [_leaves(v, "") for spec in ENVS.values() for v in spec.settings.values()]
    assert checked == sum(map(len, registered))  # every setting of every env is in the table


def _composed(*overrides: str) -> DictConfig:
    with initialize_config_dir(
        config_dir=os.path.abspath(os.path.join(ROOT, "conf")), version_base=None
    ):
        return compose("config", overrides=list(overrides))


def _yaml_value(text: str) -> object:
    return yaml.safe_load(text)


@pytest.mark.parametrize("page", ["README.md", "docs/usage.md"])
def test_the_key_tables_defaults_equal_the_dataclasses(page: str) -> None:
    """Every row ``| `key` | `value` | ...`` of the page whose key is a config key."""
    flat = defaults()
    groups = yaml.safe_load(_read("conf", "config.yaml"))["defaults"]
    choices = {k: v for g in groups if isinstance(g, dict) for k, v in g.items()}
    checked = 0
    for key, value in re.findall(r"^\| `([a-z_.]+)` \| `([^`|]*)` \|", _read(page), re.M):
        if key in flat:
            assert _yaml_value(value) == flat[key], key
            checked += 1
        elif key in choices:
            assert value == choices[key], key
            checked += 1
    assert checked >= 15  # the page's table is read (a format change would skip it)


def test_group_files_set_only_what_differs() -> None:
    """A config-group file (or an env's run length) that restates a default is a second
    source of it. (MBPO's settings per env state its whole row, defaults included, as MBPO's
    configs do; tests/test_fidelity.py checks them against MBPO's values.)"""
    flat = defaults()
    conf = os.path.join(ROOT, "conf")
    for name in sorted(os.listdir(os.path.join(conf, "algorithm"))):
        data = yaml.safe_load(_read("conf", "algorithm", name)) or {}
        for key, value in _leaves(data, "algorithm."):
            if key.endswith(".name"):
                continue
            assert key in flat, f"algorithm/{name}: unknown key {key}"
            assert value != flat[key], f"algorithm/{name}: {key}={value} is the default"
    for name, spec in ENVS.items():
        assert spec.total_steps != flat["total_steps"], f"env {name}: total_steps is the default"


def _leaves(node: dict[str, object], prefix: str) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for k, v in node.items():
        if isinstance(v, dict):
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _documented_metrics() -> set[str]:
    """The keys docs/usage.md's metrics table names: a row per `prefix/`, each backticked
    name in it a key (`reward_mean/std/max/min` and `x_real_*` spelled out)."""
    text = _read("docs", "usage.md").split("Metrics (all in `metrics.jsonl`")[1]
    table = text.split("\n| `")[1:]  # (a row per prefix; a cell may go on over lines)
    table[-1] = table[-1].split("\n\n")[0]
    keys = set()
    for row in table:
        prefix, *names = re.findall(r"`([^`]+)`", "`" + row)
        for name in names:
            stem, *more = name.split("/")
            keys.add(prefix + stem)
            keys |= {prefix + stem.rsplit("_", 1)[0] + "_" + m for m in more}
    stats = ("mean", "p10", "p50", "p90")
    keys |= {f"rewarder/x_{side}_{s}" for side in ("real", "model") for s in stats}
    return keys


def test_the_metrics_table_names_every_key_a_run_logs(tmp_path: str) -> None:
    """Every key an MBPO run with the rewarder logs (model phases, SAC, evaluation, times) is
    in docs/usage.md's metrics table, where a reader looks it up."""
    import json

    from test_mbpo import mbpo_config

    from mbrl.trainer import Trainer

    run = os.path.join(tmp_path, "run")
    extra = {"rewarder.mode": "penalty", "rewarder.steps": 2, "rewarder.flow.hidden": [8]}
    Trainer(mbpo_config(**extra), run).run()
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        logged = {k for line in f for k in json.loads(line) if "/" in k}
    missing = sorted(logged - _documented_metrics())
    assert not missing, f"logged but not in docs/usage.md's metrics table: {missing}"


def test_the_readmes_start_block_example_says_what_its_command_prints() -> None:
    """The lines of the README's example terminal that follow from its command's config alone
    (the steps, the loop, the warnings of settings that cannot act) are what this code prints
    for that command (the machine's figures in the others are the example's own)."""
    from mbrl.launch import resolve
    from mbrl.runtime.inert_settings import warnings_for
    from mbrl.runtime.report import loop_line

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    command = "$ python scripts/train.py env=hopper total_steps=6000 compile=true\n"
    block = readme.split(command, 1)[1].split("```", 1)[0].splitlines()
    overrides = command.split("train.py ", 1)[1].split()
    cfg = resolve(_composed(*overrides), overrides)
    rows = [re.match(r"  (\S+(?: \S+)*) {2,}(.*)", line) for line in block]
    shown = {row[1]: row[2] for row in rows if row}  # (label: text)
    assert shown["loop"] == loop_line(cfg)
    steps = f"0 -> {cfg.total_steps} (random until {cfg.algorithm.init_steps}; eval every "
    assert shown["steps"] == steps + f"{cfg.eval.every} steps, {cfg.eval.episodes} episodes)"
    assert [line for line in block if line.startswith("warning:")] == warnings_for(cfg)
