"""Published curves from erl_lib's five-series files: mean and std read back as they were built,
files that are not five evenly spaced curves refused, and the committed references' values."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from mbrl.tools.plotting import load_reference
from mbrl.tools.published import five_curves, reference_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "reference_csv.py")


def _erl_file(path: str, curve: dict[float, tuple[float, float]], skew: float = 0.0) -> None:
    """erl_lib's layout: series k (the "seed" column) is mean + (k - 2) std, one block of rows
    per series, steps as floats; ``skew`` moves the top series off the even spacing."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("step,time,reward,seed\n")
        for k in range(5):
            for step, (mean, std) in curve.items():
                value = mean + (k - 2) * std + (skew if k == 4 else 0.0)
                f.write(f"{step!r},{step / 10:.3f},{value!r},{float(k)!r}\n")


CURVE = {0.0: (10.9, 0.0), 6001.0: (93.0, 44.25), 8000.999999999999: (154.9, 57.7)}


def test_five_series_give_the_middle_one_and_the_gap(tmp_path: str) -> None:
    src = os.path.join(tmp_path, "Walker2d.csv")
    _erl_file(src, CURVE)
    ref = five_curves(src)
    # Step 0 (erl_lib's untrained policy) is left out; 8000.999999999999 is step 8001.
    assert ref.steps.tolist() == [6001.0, 8001.0]
    np.testing.assert_allclose(ref.mean, [93.0, 154.9], rtol=1e-12)
    np.testing.assert_allclose(ref.std, [44.25, 57.7], rtol=1e-12)
    assert five_curves(src, min_step=0).steps[0] == 0.0


def test_uneven_or_missing_series_are_refused(tmp_path: str) -> None:
    src = os.path.join(tmp_path, "bad.csv")
    _erl_file(src, CURVE, skew=3.0)
    with pytest.raises(ValueError, match=r"step 6001's five values .* are not evenly spaced"):
        five_curves(src)
    with open(src, encoding="utf-8") as f:
        lines = [line for line in f if not line.rstrip().endswith(",4.0")]
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(lines)
    with pytest.raises(ValueError, match=r"step 6001 has the series \[0, 1, 2, 3\], expected 0..4"):
        five_curves(src)
    with open(src, "w", encoding="utf-8") as f:
        f.write("step,mean,std\n6019,166.6,66.3\n")
    with pytest.raises(ValueError, match="missing reward,seed"):
        five_curves(src)


def test_the_script_writes_what_load_reference_reads(tmp_path: str) -> None:
    src, out = os.path.join(tmp_path, "Walker2d.csv"), os.path.join(tmp_path, "mbpo_walker2d.csv")
    _erl_file(src, CURVE)
    cmd = [sys.executable, SCRIPT, src, out, "--title", "MBPO on Walker2d", "--source", "erl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "2 steps, 6001 to 8001" in proc.stdout
    ref = load_reference(out)
    assert (ref.label, ref.steps.tolist(), ref.mean.tolist()) == (
        "mbpo_walker2d",
        [6001.0, 8001.0],
        [93.0, 154.9],
    )
    assert ref.std.tolist() == [44.2, 57.7]  # written to 0.1
    with open(out, encoding="utf-8") as f:
        head = f.read()
    assert head.startswith("# MBPO on Walker2d: evaluation return") and "seeds, from erl." in head
    assert "the first point here, 6001," in head
    same = subprocess.run([*cmd[:3], src, *cmd[4:]], capture_output=True, text=True, timeout=60)
    assert same.returncode == 2 and "is SRC" in same.stderr
    other = os.path.join(tmp_path, "other.csv")
    bad = subprocess.run(
        [*cmd[:2], out, other, *cmd[4:]], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "missing reward,seed" in bad.stderr
    assert not os.path.exists(other)  # refused before anything is written


@pytest.mark.parametrize(
    ("name", "first", "last", "step", "low2", "low1"),
    [
        # erl_lib's two lowest series (mean - 2 std, mean - std) at one step, read from its
        # files (results/main/gym/mbpo/); Hopper at 34 019, past where an older file stopped
        # listing every step.
        ("mbpo_hopper", 6019, 125019, 34019, 548.7761064986449, 646.6971060930476),
        ("mbpo_walker2d", 6001, 300001, 6001, 4.50176181236408, 48.73973370043954),
    ],
)
def test_committed_references_hold_erl_libs_values(
    name: str, first: int, last: int, step: int, low2: float, low1: float
) -> None:
    ref = load_reference(os.path.join(ROOT, "docs", "reference", f"{name}.csv"))
    # every evaluation, one per 1000 steps, so that no step is read off an interpolation
    assert (ref.steps[0], ref.steps[-1]) == (first, last) and np.all(np.diff(ref.steps) == 1000)
    i = ref.steps.tolist().index(step)
    assert ref.std[i] == pytest.approx(low1 - low2, abs=0.05)
    assert ref.mean[i] == pytest.approx(low1 + (low1 - low2), abs=0.05)


def test_a_reference_named_for_another_env_is_refused(tmp_path: str) -> None:
    def curve(name: str) -> str:
        path = os.path.join(tmp_path, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("step,mean,std\n6019,166.6,66.3\n")
        return path

    assert reference_for(None, {"hopper"}) is None
    assert reference_for(curve("mbpo_pendulum.csv"), {"pendulum"}) is not None
    assert reference_for(curve("my_curve.csv"), {"walker2d"}) is not None  # names no env
    with pytest.raises(ValueError, match=r"is inverted_pendulum's curve .* env=pendulum"):
        reference_for(curve("mbpo_inverted_pendulum.csv"), {"pendulum"})
    with pytest.raises(ValueError, match=r"is walker2d's curve .* env=hopper,walker2d"):
        reference_for(curve("mbpo_walker2d.csv"), {"hopper", "walker2d"})
    with open(curve("mbpo_hopper.csv"), "w", encoding="utf-8") as f:
        f.write("step,return\n1,2\n")
    with pytest.raises(ValueError, match="expected the columns step,mean,std"):
        reference_for(os.path.join(tmp_path, "mbpo_hopper.csv"), {"hopper"})
