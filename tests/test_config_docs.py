"""Defaults are stated once (mbrl/config.py; a model's or agent's own keys in its file): the
generated reference, the README's table, the config groups and the flow library's own
defaults all agree with it."""

from __future__ import annotations

import inspect
import os
import re

import pytest
import yaml

from flows import EnsembleConditionalFlow
from flows.coupled import CoupledFlows
from mbrl.config import FlowConfig
from mbrl.models.flow import FlowArchConfig
from mbrl.tools.config_table import (
    agent_rows,
    builtin_agents,
    builtin_models,
    defaults,
    markdown,
    model_rows,
)

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_docs_config_md_is_generated_from_the_dataclasses() -> None:
    assert _read("docs", "config.md") == markdown(), "run python scripts/config_table.py"


def test_every_key_has_a_meaning_in_the_reference() -> None:
    rows = [line for line in markdown().splitlines() if line.startswith("| `")]
    own = sum(len(model_rows(c)) for c in builtin_models().values())
    own += sum(len(agent_rows(c)) for c in builtin_agents().values())
    assert len(rows) == len(defaults()) + own
    assert not [r for r in rows if r.endswith("|  |")], "a config field without a comment"


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


def _signature_defaults(fn: object) -> dict[str, object]:
    params = inspect.signature(fn).parameters  # type: ignore[arg-type]
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


def test_the_flow_librarys_defaults_equal_the_config() -> None:
    for cls, config in ((EnsembleConditionalFlow, FlowArchConfig()), (CoupledFlows, FlowConfig())):
        lib = _signature_defaults(cls.__init__)
        for key, value in vars(config).items():
            expected = tuple(value) if isinstance(value, list) else value
            assert lib[key] == expected, (cls.__name__, key)


def test_group_files_set_only_what_differs() -> None:
    """A config-group file that restates a default is a second source of it. (The
    ``algorithm_env/mbpo_<env>.yaml`` files state MBPO's whole per-env row, defaults included,
    as MBPO's configs do; tests/test_fidelity.py checks them against MBPO's values.)"""
    flat = defaults()
    conf = os.path.join(ROOT, "conf")
    for group in ("algorithm", "env"):
        for name in sorted(os.listdir(os.path.join(conf, group))):
            data = yaml.safe_load(_read("conf", group, name)) or {}
            prefix = "" if group in ("env", "algorithm_env") else f"{group}."
            for key, value in _leaves(data, prefix):
                if key.endswith(".name"):
                    continue
                assert key in flat, f"{group}/{name}: unknown key {key}"
                assert value != flat[key], f"{group}/{name}: {key}={value} is the default"


def _leaves(node: dict[str, object], prefix: str) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for k, v in node.items():
        if isinstance(v, dict):
            out += _leaves(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out
