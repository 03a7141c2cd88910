"""``scripts/seeds.py``'s command-line values, each checked before anything runs: a mistake
is one line (``ValueError``, or the parser's own error) that names the value and what is
allowed, with exit code 2, as train.py answers a bad override."""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from typing import NoReturn

from mbrl.tools.seed_runs import START_AND_STOP, Variant


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors on one line (no usage block above them)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def whole_number(text: str) -> int:
    """A count written as people write steps: ``50000``, ``5e4``, ``1.5e3``."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():  # (nan, inf and fractions too)
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, e.g. 50000 or 5e4")
    return int(value)


def parse_duration(text: str) -> float:
    """``2h``, ``90m``, ``1h30m``, ``300s`` or plain seconds -> seconds."""
    plain = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", plain):
        return float(plain)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", plain)
    if not parts or "".join(n + u for n, u in parts) != plain:
        raise ValueError(f"--budget {text!r}: give a duration such as 2h, 90m, 1h30m or 300s")
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0}
    return sum(float(n) * unit[u] for n, u in parts)


def check_budget(text: str) -> float:
    """``--budget``'s seconds (:func:`parse_duration`), refused when no run could start, work
    and stop within it."""
    # (a run starts only with 2 x START_AND_STOP left, counted after the command's own start)
    seconds, least = parse_duration(text), 2.5 * START_AND_STOP
    if seconds < least:
        raise ValueError(
            f"--budget {text}: {seconds:g} s leaves no run time to start, work and stop (at "
            f"least {least:.0f} s); give more, e.g. 10m or 2h (a plain number counts seconds)"
        )
    return seconds


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,5`` (or both: ``0-2,7``) -> the seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = (x.strip() for x in part.partition("-"))
        if not low.isdigit() or (dash and not high.isdigit()):  # (0-, 0,,2, 1,: not seeds)
            raise ValueError(f"--seeds {text!r}: give seeds as 0-4 or 0,1,2 (non-negative)")
        if high and int(high) < int(low):
            raise ValueError(f"--seeds {text!r}: {part} counts down; give it as {high}-{low}")
        seeds += range(int(low), int(high or low) + 1)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: give each seed once (0-4 or 0,1,2)")
    return seeds


def variants(vary: list[str], given: list[str]) -> list[Variant]:
    """--vary's combinations, then --variant's, each once."""
    axes, keys = [], set()
    for spec in vary:
        key, sep, values = spec.partition("=")
        if not sep or not key or not values:
            raise ValueError(f"--vary {spec!r}: give key=value1,value2")
        if key in keys:  # (two axes of one key would set it twice in every run)
            raise ValueError(f"--vary {spec!r}: {key} is varied twice; give its values in one")
        split = values.split(",")
        if twice := sorted({v for v in split if split.count(v) > 1}):
            raise ValueError(f"--vary {spec!r}: {', '.join(twice)} given twice; give each once")
        keys.add(key)
        axes.append([f"{key}={v}" for v in split])
    out = [Variant(tuple(c)) for c in itertools.product(*axes)] if axes else []
    out += [Variant(tuple(v.split())) for v in given]
    return list(dict.fromkeys(out)) or [Variant(())]


def overridden(base: list[str], arms: list[Variant]) -> list[str]:
    """A note per override for every run that variants set again: theirs wins in their runs
    (the later override), so the note says where ``base``'s value does not apply."""
    notes = []
    for given in base:
        key = _key(given)
        setting = [a.label for a in arms if any(_key(o) == key for o in a.overrides)]
        if len(setting) == len(arms):
            notes.append(f"note: {given} (for every run) applies to none: each variant sets {key}")
        elif setting:
            notes.append(
                f"note: {given} (for every run) does not apply to {', '.join(setting)}, "
                f"which set{'s' if len(setting) == 1 else ''} {key}"
            )
    return notes


def _key(override: str) -> str:
    """``+a.b=1`` -> ``a.b``."""
    return override.lstrip("+~").partition("=")[0]
