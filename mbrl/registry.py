"""The one registry type behind ``model=<name>`` (mbrl.models), ``agent=<name>``
(mbrl.agents) and ``env=<name>`` (mbrl.envs): names in the order they were registered, each
to its entry, with a lookup whose error names the closest one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore

from mbrl.config import ConfigError
from mbrl.plugins import locate

T = TypeVar("T")
C = TypeVar("C")


class Registry(Mapping[str, T]):
    """``key=<name>`` -> its entry. Read it as a mapping (``name in MODELS``, ``MODELS[name]``,
    in registration order); :meth:`lookup` is the reading for a name a user typed."""

    def __init__(self, key: str, what: str, error: type[Exception] = ConfigError) -> None:
        self.key = key  # the config key the name is given to: model, agent, env
        self.what = what  # what an entry is, with its article: "a model"
        self.error = error  # what lookup raises for an unknown name
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Make ``name`` select ``entry`` (a name registered again selects the new entry)."""
        if not (isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_-]+", name)):
            raise ValueError(
                f"{self.key} name {name!r} is not allowed; use letters, digits, _ and - "
                f"(it is typed as {self.key}=<name>)"
            )
        self._entries[name] = entry
        return entry

    def lookup(self, name: str) -> T:
        """The entry ``name`` selects; for a name never registered, an error that names the
        closest registered one and lists them all."""
        if name in self._entries:
            return self._entries[name]
        names = self.names()
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise self.error(
            f"{self.key}={name!r} is not {self.what}; {hint}allowed: {', '.join(names)}"
        )

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._entries)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class ConfigRegistry(Registry[type[C]]):
    """Config dataclasses that ``key=<name>`` selects (models, agents): each registered name
    is also hydra's choice in the config group ``key``."""

    def __init__(self, key: str, what: str, base: type[C]) -> None:
        super().__init__(key, what)
        self.base = base  # what every entry subclasses: ModelConfig, AgentConfig

    def add(self, name: str, config: type[C]) -> None:
        """Make ``<key>=<name>`` select ``config`` (its defaults, its ``_target_`` class)."""
        if not (isinstance(config, type) and issubclass(config, self.base)):
            article = "an" if self.base.__name__[0] in "AEIOU" else "a"
            raise TypeError(
                f"register_{self.key}({name!r}, {config!r}): need {article} "
                f"{self.base.__name__} subclass"
            )
        self.register(name, config)
        ConfigStore.instance().store(group=self.key, name=name, node=config)

    def config(self, name: str, **values: Any) -> C:
        """The config ``<key>=<name>`` selects, with ``values`` set (a ConfigError for a name
        never registered)."""
        return self.lookup(name)(**values)


def target_class(key: str, target: str) -> type[Any]:
    """The class ``<key>._target_`` names; a one-line ConfigError when it cannot be imported
    (``mbrl.plugins.locate``: it names the fix for a class of one's own)."""
    cls: type[Any] = locate(target, f"{key}._target_")
    return cls
