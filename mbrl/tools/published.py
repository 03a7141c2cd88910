"""A published curve as ``--reference`` reads it (step,mean,std) from a file of five curves.

erl_lib's results (4kubo/erl_lib, results/main/gym/<algorithm>/<Env>.csv) hold one method's
curve as five series in the columns ``step,time,reward,seed``, the "seed" column numbering the
series 0..4: at every step they are mean - 2 std, mean - std, mean, mean + std and mean + 2 std,
evenly spaced. So the mean is the middle series and the std the gap between it and the next;
a step whose five values are not evenly spaced is not such a file, and is refused rather than
read as something it is not.

``reference_for`` is ``--reference`` as ``scripts/seeds.py`` takes it: read before any run
starts, and matched with the runs' env.
"""

from __future__ import annotations

import csv
from collections import defaultdict

import numpy as np

from mbrl.envs.specs import ENVS
from mbrl.tools.plotting import Reference, load_reference

SERIES = 5
TOLERANCE = 1e-6  # relative to the values' size: the files hold the series to float precision


def five_curves(path: str, min_step: float = 1.0) -> Reference:
    """The mean and std per step of an erl_lib five-series CSV, steps rounded to integers.
    Steps below ``min_step`` are left out (erl_lib's step 0 is its own untrained policy, not
    the method's first evaluation)."""
    by_step: dict[int, dict[int, float]] = defaultdict(dict)
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = {"step", "reward", "seed"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(
                f"{path}: expected the columns step,reward,seed (erl_lib's step,time,reward,"
                f"seed), missing {','.join(sorted(missing))}"
            )
        for row in reader:
            step = round(float(row["step"]))
            if step >= min_step:
                by_step[step][int(float(row["seed"]))] = float(row["reward"])
    if not by_step:
        raise ValueError(f"{path}: no row at a step >= {min_step:g}")
    steps = sorted(by_step)
    values = np.array([_series(path, s, by_step[s]) for s in steps])
    return Reference(
        label="",
        steps=np.array(steps, dtype=float),
        mean=values[:, 2],
        std=values[:, 3] - values[:, 2],
    )


def _series(path: str, step: int, values: dict[int, float]) -> list[float]:
    """The five values at one step, in series order, checked to be evenly spaced."""
    if sorted(values) != list(range(SERIES)):
        raise ValueError(
            f"{path}: step {step} has the series {sorted(values)}, expected 0..{SERIES - 1}"
        )
    ordered = [values[k] for k in range(SERIES)]
    gaps = np.diff(ordered)
    if np.ptp(gaps) > TOLERANCE * max(1.0, float(np.max(np.abs(ordered)))):
        raise ValueError(
            f"{path}: step {step}'s five values {[round(v, 3) for v in ordered]} are not evenly "
            "spaced, so they are not mean -2..+2 std of one curve"
        )
    return ordered


def write_reference(ref: Reference, out: str, header: str) -> None:
    """``out`` as ``load_reference`` reads it: ``header`` as ``#`` lines, then step,mean,std
    with the values to 0.1 (the published curves' own precision is far coarser)."""
    with open(out, "w", encoding="utf-8") as f:
        for line in header.rstrip("\n").split("\n"):
            f.write(f"# {line}".rstrip() + "\n")
        f.write("step,mean,std\n")
        for step, mean, std in zip(ref.steps, ref.mean, ref.std, strict=True):
            f.write(f"{step:.0f},{mean:.1f},{std:.1f}\n")


def reference_for(path: str | None, envs: set[str]) -> Reference | None:
    """``--reference``'s curve, read before anything runs; refused when its file name names
    another env than the runs' (``mbpo_hopper.csv`` beside Walker2d runs), so that a command
    copied from one env to another does not compare with the wrong curve."""
    if path is None:
        return None
    try:
        ref = load_reference(path)
    except OSError as err:
        raise ValueError(f"--reference {path}: {err.strerror or err}") from None
    named = [e for e in ENVS.names() if ref.label == e or ref.label.endswith(f"_{e}")]
    named = [max(named, key=len)] if named else []  # (mbpo_inverted_pendulum: not pendulum)
    if named and envs and named != sorted(envs):
        raise ValueError(
            f"--reference {path} is {named[0]}'s curve (its file name); the runs are "
            f"env={','.join(sorted(envs))}: give that env's curve (docs/reference/), or none"
        )
    return ref
