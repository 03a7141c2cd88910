"""The command line of ``scripts/train.py``, checked before hydra reads it.

Hydra's own answer to a mistyped option, key or config-group choice is its usage text, a
suggestion to add ``+``, or a list of search paths with "Set HYDRA_FULL_ERROR=1"; each of
these is answered here instead, in one line with the closest real name, exit code 2.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Mapping
from typing import Any

from hydra.core.config_store import ConfigStore

from mbrl.agents import AGENTS
from mbrl.config import ConfigError
from mbrl.models import MODELS
from mbrl.runtime import distributed
from mbrl.runtime.validate import check_key

# conf/'s folders and the groups registered in code (agents, models)
CONFIG_GROUPS = ("env", "algorithm", "agent", "model", "algorithm_env", "model_env")
SHORTHANDS = {"profile=true": "profile.enabled=true", "profile=false": "profile.enabled=false"}

# Hydra's own command-line flags; anything else starting with "-" is a mistyped override.
HYDRA_FLAGS = {
    "-h", "--help", "--hydra-help", "--version", "-c", "--cfg", "--resolve", "-p", "--package",
    "-r", "--run", "-m", "--multirun", "-sc", "--shell-completion", "-cp", "--config-path",
    "-cn", "--config-name", "-cd", "--config-dir", "--experimental-rerun", "-i", "--info",
}  # fmt: skip


def fail(err: Exception, code: int = 2) -> None:
    """One line on stderr (once, under torchrun), then exit."""
    if distributed.is_main():  # (under torchrun every rank fails alike; one message is enough)
        print(f"error: {err}", file=sys.stderr)
    sys.exit(code)


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def refuse_flags(argv: list[str]) -> None:
    """``--env hopper`` ends in argparse's usage text; say once what FlowMBPO takes instead."""
    for i, arg in enumerate(argv[1:], start=1):
        flag = arg.split("=", 1)[0]
        if arg.startswith("-") and flag not in HYDRA_FLAGS:
            value = argv[i + 1] if "=" not in arg and i + 1 < len(argv) else ""
            given = arg if "=" in arg or not value else f"{arg} {value}"
            key = flag.lstrip("-").replace("-", "_")
            example = f"{key}={arg.split('=', 1)[1] if '=' in arg else value or '...'}"
            fail(
                ConfigError(
                    f"{given!r} is not an option: FlowMBPO takes hydra overrides, key=value "
                    f"(here: {example}); `--help` lists the config groups"
                )
            )


def refuse_unknown_overrides(argv: list[str], conf_dir: str) -> None:
    """Before hydra: an override of a key the config does not have, with or without ``+``,
    or a config group's choice that is not one of its files (``env=hoper``), stops with one
    message naming the closest real one."""
    model, agent = _chosen_target(argv, "model", MODELS), _chosen_target(argv, "agent", AGENTS)
    for arg in argv[1:]:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = override_key(arg), arg.split("=", 1)[1]
        try:
            if key in CONFIG_GROUPS:
                check_choice(key, value, conf_dir)
            elif key.split(".")[0].split("/")[0] != "hydra":  # (hydra's own: hydra/launcher=)
                check_key(key, model, agent)
        except ConfigError as err:
            fail(err)


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
            raise ConfigError(
                f"{group}={one!r} is not one of the {group} choices; {hint}choose one of: "
                f"{', '.join(choices)}"
            )


def _chosen_target(argv: list[str], group: str, registered: Mapping[str, Any]) -> str | None:
    """The class the command line picks for ``group`` (``model=<name>``,
    ``model._target_=...``; ``agent`` alike), ``registered`` mapping names to configs; None:
    the default class, or a name refused by :func:`check_choice`."""
    choice, target = None, None  # (the last of each, as hydra takes them)
    for arg in argv[1:]:
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key == group:
            choice = registered[value]._target_ if value in registered else None
        elif key == f"{group}._target_":
            target = value
    return target or choice


def expand_shorthands(argv: list[str]) -> list[str]:
    """``profile=true`` -> ``profile.enabled=true``: ``profile`` is also the node of the
    profiling window's settings (``profile.updates=...``), and hydra cannot set a node to a bool."""
    return [SHORTHANDS.get(arg.lower(), arg) for arg in argv]


def resume_folders(argv: list[str]) -> list[str]:
    """``resume=<run>/ckpt/last.pt`` -> ``resume=<run>``: resume= takes the run folder (it is
    also where the run goes on writing); another checkpoint file is refused by name."""
    out = []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "resume" and os.path.isfile(value):
            ckpt, name = os.path.split(os.path.normpath(value))
            run = os.path.dirname(ckpt)
            if name != "last.pt" or os.path.basename(ckpt) != "ckpt":
                fail(
                    ConfigError(
                        f"resume={value!r} is a file; resume= takes a run folder and continues "
                        f"from its ckpt/last.pt (here: resume={run or '.'}). To continue from "
                        "another checkpoint that holds the buffers (ckpt_best.pt), copy it "
                        "over ckpt/last.pt first"
                    )
                )
            arg = f"resume={run or '.'}"
        out.append(arg)
    return out
