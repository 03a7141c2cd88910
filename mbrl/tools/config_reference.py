"""The reference table of every config key, generated from ``mbrl/config.py``: each key, its
default and the comment beside it in the dataclass. ``docs/config.md`` is this table
(``python scripts/config_table.py`` rewrites it; a test checks it is current)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import sys
import tokenize
from typing import Any

from omegaconf import OmegaConf

from mbrl import config as config_module
from mbrl.agents import AGENTS
from mbrl.config import AgentConfig, Config, ModelConfig
from mbrl.envs import ENVS, env_dims, make_env, termination
from mbrl.models import MODELS

HEADER = """# Config reference

Generated from `mbrl/config.py` by `python scripts/config_table.py`; do not edit by hand.
Config groups (`conf/`) change some of these per algorithm, model and env: see the README.
Set any key on the command line, e.g. `python scripts/train.py env=hopper model.lr=3e-4`.
"""


def _comments(module: Any = config_module) -> dict[tuple[str, str], str]:
    """(class name, field name) -> the comment on the field's line(s) in ``module``."""
    source = inspect.getsource(module)
    by_line: dict[int, str] = {}  # every comment, by line
    whole: set[int] = set()  # lines that hold only a comment
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            by_line[tok.start[0]] = tok.string.lstrip("#").strip()
            if tok.line.lstrip().startswith("#"):
                whole.add(tok.start[0])
    out = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                above = _block_above(stmt.lineno, by_line, whole)
                last = (stmt.end_lineno or stmt.lineno) + 1
                inline = [by_line[n] for n in range(stmt.lineno, last) if n in by_line]
                out[(node.name, stmt.target.id)] = " ".join(above + inline)
    return out


def _block_above(line: int, by_line: dict[int, str], whole: set[int]) -> list[str]:
    """Comment lines that sit directly above ``line`` (no code line between)."""
    lines: list[str] = []
    n = line - 1
    while n in whole:
        lines.insert(0, by_line[n])
        n -= 1
    return lines


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def _walk(
    obj: Any, prefix: str, comments: dict[tuple[str, str], str]
) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            out += _walk(value, key + ".", comments)
            continue
        owners = [c.__name__ for c in type(obj).__mro__]  # a field may be inherited
        meaning = next((comments[c, f.name] for c in owners if comments.get((c, f.name))), "")
        out.append((key, _value(value), meaning))
    return out


def rows() -> list[tuple[str, str, str]]:
    """(key, default, meaning) for every leaf key of :class:`Config`, in declaration order
    (``model.*``, ``agent.*``: the keys every model, agent has, at the default's values)."""
    return _walk(Config(), "", _comments())


def builtin_models() -> dict[str, type[ModelConfig]]:
    """The models the library registers (not those a user's module or a test adds)."""
    return {n: c for n, c in MODELS.items() if c.__module__.startswith("mbrl.")}


def builtin_agents() -> dict[str, type[AgentConfig]]:
    """The agents the library registers (not those a user's module or a test adds)."""
    return {n: c for n, c in AGENTS.items() if c.__module__.startswith("mbrl.")}


def model_rows(config: type[ModelConfig]) -> list[tuple[str, str, str]]:
    """A model's own keys and the common ones it sets otherwise, with their meanings."""
    return _own_rows(config, ModelConfig, "model.")


def agent_rows(config: type[AgentConfig]) -> list[tuple[str, str, str]]:
    """An agent's own keys and the loop's ones it sets otherwise, with their meanings."""
    return _own_rows(config, AgentConfig, "agent.")


def _own_rows(config: type[Any], base: type[Any], prefix: str) -> list[tuple[str, str, str]]:
    comments = _comments() | _comments(sys.modules[config.__module__])
    common = dict((k, v) for k, v, _ in _walk(base(), prefix, comments))
    return [r for r in _walk(config(), prefix, comments) if common.get(r[0]) != r[1]]


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for key, default, meaning in rows:
        cell = meaning.replace("|", "\\|")
        lines.append(f"| `{key}` | `{default}` | {cell} |")
    return lines


def env_lines() -> list[str]:
    """The table of envs (``env=<name>``, from :data:`mbrl.envs.ENVS`): gymnasium ids,
    sizes, termination, run length and the algorithms with settings of their own there."""
    lines = [
        "",
        "## Environments (`env=<name>`, mbrl/envs/specs.py)",
        "",
        "The first gymnasium id is the default version (`env.version`). Each algorithm under",
        "*settings* has settings of its own on the env (MBPO's: its paper's), applied when both",
        "are chosen.",
        "",
        "| `env=` | gymnasium ids | obs / act dims | terminates | `total_steps` | settings "
        "| note |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, spec in ENVS.items():
        env = make_env(name)
        obs, act = env_dims(env)
        env.close()
        ids = ", ".join(v.gym_id for _, v in spec.versions)
        ends = "no" if spec.termination_fn is termination.never else "yes"
        algorithms = ", ".join(f"`{a}`" for a in spec.settings)
        steps = f"{spec.total_steps:,}".replace(",", " ")
        lines.append(
            f"| `{name}` | {ids} | {obs} / {act} | {ends} | {steps} | {algorithms} | {spec.about} |"
        )
    return lines


def markdown() -> str:
    lines = [HEADER, *_table(rows())]
    sections: list[tuple[str, str, type[Any], list[tuple[str, str, str]]]]
    sections = [("model", n, c, model_rows(c)) for n, c in builtin_models().items()]
    sections += [("agent", n, c, agent_rows(c)) for n, c in builtin_agents().items()]
    for group, name, config, own in sections:
        doc = (config.__doc__ or "").strip().splitlines()[0]
        lines += ["", f"## `{group}={name}` ({config.__module__})", "", doc, "", *_table(own)]
    lines += env_lines()
    return "\n".join(lines) + "\n"


def defaults() -> dict[str, Any]:
    """Every leaf key's default, as plain values (for tests that read the README's table)."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and v:  # (an empty mapping, `plugins`, is a value)
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(OmegaConf.to_container(OmegaConf.structured(Config())), "")
    return flat
