"""Plug-in modules: a model, agent or env of your own, in a module that registers it
(``register_model``, ``register_agent``, ``register_env``) when imported.

``FLOWMBPO_PLUGINS`` (comma-separated module names) names them for a new run; they are
imported before hydra composes the config. A run's ``config.yaml`` keeps each under
``plugins`` with the folder it was imported from, so that a resume, ``scripts/evaluate.py``,
``scripts/probe.py`` and ``scripts/seeds.py`` import them again without the variable.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

from mbrl.config import ConfigError

VAR = "FLOWMBPO_PLUGINS"
IMPORTED: dict[str, str] = {}  # module -> the folder (a sys.path root) it was imported from


class PluginError(ConfigError):
    """A plug-in module that cannot be imported (the message names it and the fix)."""


def requested() -> list[str]:
    """The modules ``$FLOWMBPO_PLUGINS`` names."""
    return [n.strip() for n in os.environ.get(VAR, "").split(",") if n.strip()]


def import_plugins(names: Iterable[str] | Mapping[str, str], source: str = VAR) -> None:
    """Import each module (``source``: where its name came from, the errors' prefix). With a
    mapping of module -> folder, a module that Python's path does not find is looked for in
    the folder it was imported from when the run started."""
    folders = dict(names) if isinstance(names, Mapping) else dict.fromkeys(names, "")
    for name, folder in folders.items():
        if name not in IMPORTED:
            IMPORTED[name] = _root(_import(name, str(folder or ""), source), name)


def import_saved(raw: Any, source: str) -> None:
    """Import the plug-ins a saved config (``raw``: its mapping) lists under ``plugins``."""
    saved = raw.get("plugins") if isinstance(raw, Mapping) else None
    if isinstance(saved, Mapping) and saved:
        import_plugins({str(k): str(v or "") for k, v in saved.items()}, source)


def _import(name: str, folder: str, source: str) -> ModuleType:
    prefix = f"{source}: " if source else ""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if not (err.name and name.startswith(err.name)):  # (one of the module's own imports)
            raise PluginError(f"{prefix}importing plug-in {name!r} failed: {err}") from None
        if folder and os.path.isdir(folder) and folder not in sys.path:
            sys.path.append(folder)  # (appended: a module of the same name elsewhere wins)
            return _import(name, folder, source)
        fix = _fix(name, folder)
        raise PluginError(f"{prefix}cannot import plug-in {name!r} ({err}); {fix}") from None
    except ImportError as err:
        raise PluginError(f"{prefix}importing plug-in {name!r} failed: {err}") from None


def _fix(name: str, folder: str) -> str:
    """How to make ``name`` importable: its folder on PYTHONPATH."""
    file = os.path.join(*name.split(".")) + ".py"
    if folder:
        return f"put the folder that holds {file} on PYTHONPATH (the run imported it from {folder})"
    if os.path.isfile(file):  # (a script's folder and checkout are on Python's path; cwd is not)
        return f"{file} is in the current folder: run with PYTHONPATH=. to import it from there"
    return f"a plug-in must be importable: put the folder that holds {file} on PYTHONPATH"


def _root(module: ModuleType, name: str) -> str:
    """The sys.path folder ``module`` (named ``name``) was imported from ('' if unknown)."""
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    depth = name.count(".") + 1 + (os.path.basename(path) == "__init__.py")
    for _ in range(depth):
        path = os.path.dirname(path)
    return os.path.abspath(path)


def locate(target: str, key: str) -> Any:
    """The class ``target`` (``module.Class``) names; a one-line PluginError naming ``key``
    when it cannot be imported (hydra's ``get_class`` logs several lines first)."""
    module_name, _, attr = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise PluginError(
            f"{key}={target!r} cannot be imported ({type(err).__name__}: {err}); a class of your "
            f"own is imported through {VAR}, its folder on PYTHONPATH (docs/model.md)"
        ) from None


def environment() -> dict[str, str]:
    """``FLOWMBPO_PLUGINS`` and ``PYTHONPATH`` for a process that is to import the plug-ins
    this one imported (scripts/seeds.py's runs)."""
    if not IMPORTED:
        return {}
    path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    folders = [f for f in dict.fromkeys(IMPORTED.values()) if f and f not in path]
    return {VAR: ",".join(IMPORTED), "PYTHONPATH": os.pathsep.join([*filter(None, path), *folders])}
