"""The command line of ``scripts/train.py``, checked before hydra reads it.

Hydra's own answer to a mistyped option, key or config-group choice is its usage text, a
suggestion to add ``+``, or a list of search paths with "Set HYDRA_FULL_ERROR=1"; each of
these is answered here instead, in one line with the closest real name, exit code 2.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Sweep
from omegaconf import BooleanNode, DictConfig, FloatNode, IntegerNode, ListConfig
from omegaconf.errors import OmegaConfBaseException

from mbrl.agents import AGENTS
from mbrl.config import ConfigError
from mbrl.models import MODELS
from mbrl.runtime import distributed
from mbrl.runtime.utils import hydra_value
from mbrl.runtime.validate import check_key, schema_for

# conf/'s folders and the groups registered in code (agents, models)
CONFIG_GROUPS = ("env", "algorithm", "agent", "model", "algorithm_env", "model_env")
# Groups a plug-in module registers choices of (register_env, register_model, register_agent)
PLUGIN_GROUPS = ("env", "model", "agent")
PLUGIN_HINT = " (your own {0}: name its module in FLOWMBPO_PLUGINS, docs/model.md)"
SHORTHANDS = {"profile=true": "profile.enabled=true", "profile=false": "profile.enabled=false"}

# Hydra's own command-line flags; anything else starting with "-" is a mistyped override.
HYDRA_FLAGS = {
    "-h", "--help", "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p", "--package",
    "-r", "--run", "-m", "--multirun", "-sc", "--shell-completion", "-cp", "--config-path",
    "-cn", "--config-name", "-cd", "--config-dir", "--experimental-rerun", "-i", "--info",
}  # fmt: skip


def fail(err: Exception, code: int = 2) -> NoReturn:
    """One line on stderr (once, under torchrun), then exit."""
    if distributed.is_main():  # (under torchrun every rank fails alike; one message is enough)
        print(f"error: {err}", file=sys.stderr)
    sys.exit(code)


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def command_line(argv: list[str], conf_dir: str) -> list[str]:
    """``scripts/train.py``'s ``argv`` as hydra is to read it, checked before hydra reads it:
    the first mistake ends the process with one line (exit code 2)."""
    try:
        refuse_flags(argv)
        argv = resume_folders(expand_shorthands(resolvable_cfg(argv)))
        return argv[:1] + check_overrides(argv[1:], conf_dir)
    except ConfigError as err:
        fail(err)


def refuse_flags(argv: list[str]) -> None:
    """``--env hopper`` ends in argparse's usage text; say once what FlowMBPO takes instead."""
    for i, arg in enumerate(argv[1:], start=1):
        flag = arg.split("=", 1)[0]
        if arg.startswith("-") and flag not in HYDRA_FLAGS:
            value = argv[i + 1] if "=" not in arg and i + 1 < len(argv) else ""
            given = arg if "=" in arg or not value else f"{arg} {value}"
            key = flag.lstrip("-").replace("-", "_")
            example = f"{key}={arg.split('=', 1)[1] if '=' in arg else value or '...'}"
            raise ConfigError(
                f"{given!r} is not an option: FlowMBPO takes hydra overrides, key=value "
                f"(here: {example}); `--help` lists the config groups"
            )


def check_overrides(overrides: list[str], conf_dir: str) -> list[str]:
    """A ConfigError for the first override of an unknown key (with or without ``+``) or group
    choice (``env=hoper``), or of a value of the wrong type, naming the closest real one
    (options and other arguments are skipped); scripts/seeds.py checks its overrides with it
    too. Returns them with integral floats of integer keys as integers (``1e4`` -> ``10000``)."""
    model = _chosen_target(overrides, "model", MODELS)
    root = schema_for(model, _chosen_target(overrides, "agent", AGENTS))
    out = []
    for arg in overrides:
        key = override_key(arg)
        if arg.startswith("-") or "=" not in arg:
            pass
        elif key in CONFIG_GROUPS:
            check_choice(key, arg.split("=", 1)[1], conf_dir)
        elif key.split(".")[0].split("/")[0] != "hydra":  # (hydra's own: hydra/launcher=)
            arg = check_value(arg, check_key(key, root))
        out.append(arg)
    return out


def group_choices(group: str, conf_dir: str) -> list[str]:
    """A config group's choices: its files in ``conf/`` and the configs code registered
    (models, agents, plug-ins imported by then)."""
    folder = os.path.join(conf_dir, group)
    files = os.listdir(folder) if os.path.isdir(folder) else []
    names = {f.removesuffix(".yaml") for f in files if f.endswith(".yaml")}
    with contextlib.suppress(OSError):  # (OSError: no config of this group in code)
        names |= {n.removesuffix(".yaml") for n in ConfigStore.instance().list(group)}
    return sorted(names)


def check_choice(group: str, value: str, conf_dir: str) -> None:
    """``value`` (or each of a sweep's ``a,b``) must be one of ``group``'s choices. Hydra's
    sweep functions (``choice(...)``, ``glob(...)``) and ``null`` are left to hydra."""
    if "(" in value or value == "null":
        return
    choices = group_choices(group, conf_dir)
    for one in value.split(","):
        if one not in choices:
            close = difflib.get_close_matches(one, choices, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            mine = "" if close or group not in PLUGIN_GROUPS else PLUGIN_HINT.format(group)
            raise ConfigError(
                f"{group}={one!r} is not one of the {group} choices; {hint}choose one of: "
                f"{', '.join(choices)}{mine}"
            )


def _chosen_target(overrides: list[str], group: str, registered: Mapping[str, Any]) -> str | None:
    """The class the overrides pick for ``group`` (``model=<name>``,
    ``model._target_=...``; ``agent`` alike), ``registered`` mapping names to configs; None:
    the default class, or a name refused by :func:`check_choice`."""
    choice, target = None, None  # (the last of each, as hydra takes them)
    for arg in overrides:
        key, value = override_key(arg), arg.partition("=")[2]
        if key == group:
            choice = registered[value]._target_ if value in registered else None
        elif key == f"{group}._target_":
            target = value
    return target or choice


def expand_shorthands(argv: list[str]) -> list[str]:
    """``profile=true`` -> ``profile.enabled=true``: ``profile`` is also the node of the
    profiling window's settings (``profile.updates=...``), and hydra cannot set a node to a bool."""
    return [SHORTHANDS.get(arg.lower(), arg) for arg in argv]


def resolvable_cfg(argv: list[str]) -> list[str]:
    """``--cfg hydra --resolve`` -> ``--cfg all --resolve --package hydra``: the run folder
    (``hydra.run.dir``, ``hydra.output_subdir``) is made from the job's keys (``resume``,
    ``env.name``, ...), which ``--cfg hydra`` leaves out, so hydra could not resolve it alone
    (a traceback); from the whole config it prints the same node, resolved."""
    flags = [a.split("=", 1) for a in argv]
    if ["--resolve"] not in flags:
        return argv
    out, package = [], any(f[0] in ("-p", "--package") for f in flags)
    for i, arg in enumerate(argv):
        if arg in ("--cfg=hydra", "-c=hydra"):
            out.append(arg.replace("hydra", "all"))
        elif arg == "hydra" and i > 0 and argv[i - 1] in ("-c", "--cfg"):
            out.append("all")
        else:
            out.append(arg)
    return out if out == argv or package else [*out, "--package", "hydra"]


def resume_folders(argv: list[str]) -> list[str]:
    """``resume=<run>/ckpt/last.pt`` -> ``resume=<run>``: resume= takes the run folder (it is
    also where the run goes on writing); another checkpoint file is refused by name."""
    out = []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "resume" and os.path.isfile(value):
            ckpt, name = os.path.split(os.path.normpath(value))
            run = os.path.dirname(ckpt)
            if os.path.basename(ckpt) != "ckpt":  # (no checkpoint of a run folder)
                raise ConfigError(
                    f"resume={value!r} is a file, not a run folder: give the run's folder "
                    "(the one that holds config.yaml and ckpt/)"
                )
            if name != "last.pt":
                typed = shlex.quote(f"resume={hydra_value(run or '.')}")  # (as for the shell)
                raise ConfigError(
                    f"resume={value!r} is a file; resume= takes a run folder and continues "
                    f"from its ckpt/last.pt (here: {typed}). To "
                    "continue from another checkpoint that holds the buffers (ckpt_best.pt), "
                    "copy it over ckpt/last.pt first"
                )
            arg = f"resume={hydra_value(run or '.')}"
        out.append(arg)
    return out


# What a key of each node type takes, for the message of a value of another type
KINDS = {IntegerNode: "an integer", FloatNode: "a number", BooleanNode: "true or false"}


def check_value(arg: str, node: Any) -> str:
    """A ConfigError for ``arg``'s value (each of a sweep's ``a,b``) when its key's ``node``
    cannot take it, or for ``+key=`` of a key the config has; returns ``arg``, an integral
    float of an integer key as an integer (``1e4`` -> ``10000``: how people write steps)."""
    try:
        override = OverridesParser.create().parse_override(arg)
    except Exception:  # (a syntax error is left to hydra)
        return arg
    key, text = override.key_or_group, arg.split("=", 1)[1]
    if override.is_add() and not override.is_force_add():
        raise ConfigError(
            f"{arg!r} adds a key, and {key} is one already: write {key}={text} (hydra's '+' "
            "is for a key the config lacks)"
        )
    value = override.value()
    values: list[Any] = list(value.list) if isinstance(value, ChoiceSweep) else [value]
    ranged = isinstance(value, Sweep) and not isinstance(value, ChoiceSweep)
    if ranged or isinstance(node, DictConfig):
        return arg  # (range and glob sweeps, mappings: hydra checks them)
    integral = [
        isinstance(node, IntegerNode) and isinstance(v, float) and v.is_integer() for v in values
    ]
    values = [int(v) if i else v for v, i in zip(values, integral, strict=True)]
    for v in values:
        try:
            copy.deepcopy(node)._set_value(v)
        except OmegaConfBaseException:
            kind = _kind(key, node, v)
            raise ConfigError(f"{key}={text} is not allowed; it must be {kind}") from None
    if not any(integral):
        return arg
    return f"{arg.split('=', 1)[0]}={','.join(map(str, values))}"


def _kind(key: str, node: Any, value: Any) -> str:
    if isinstance(node, ListConfig):
        element = getattr(node._metadata.element_type, "__name__", "value")
        example = f"[{value},{value}]" if not isinstance(value, list) else "[...]"
        return f"a list of {element} values, e.g. {key}={example}"
    kind = next((k for t, k in KINDS.items() if isinstance(node, t)), f"a {type(node).__name__}")
    if isinstance(node, IntegerNode) and isinstance(value, float):
        return f"{kind} (1e4 or 1.5e3 is read as 10000 or 1500; a fraction is not an integer)"
    return kind if value is not None else f"{kind}, not null"
