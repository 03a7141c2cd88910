"""scripts/gpu_slot.sh, the one command for a lent GPU slot, tried on a CPU with tiny runs: its
files appear under OUT, E1's two variants run and are reported, and a slot too short for E1
says so instead of starting runs it cannot finish."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from test_cli import TINY

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOT = os.path.join(ROOT, "scripts", "gpu_slot.sh")
# TINY's settings that a Gaussian run takes (the device is the script's own override)
BASE = " ".join(o for o in TINY if not o.startswith(("device=", "model.flow.")))


def _slot(tmp_path: str, seconds: int, **more: str) -> tuple[subprocess.CompletedProcess[str], str]:
    out = os.path.join(tmp_path, "out")
    env = {**os.environ, "DEVICE": "cpu", "COMPILE": "false", "SEEDS": "0", "BASE": BASE, **more}
    env["PYTHON"] = sys.executable
    env["CAMPAIGN"] = os.path.join(tmp_path, "campaign")
    proc = subprocess.run([SLOT, out, str(seconds)], env=env, capture_output=True, text=True,
                          timeout=seconds + 120, cwd=ROOT)  # fmt: skip
    return proc, out


def test_the_slot_runs_e1_and_checks_each_runs_estimate(tmp_path: str) -> None:
    proc, out = _slot(str(tmp_path), 300)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(out, "slot.txt"), encoding="utf-8") as f:
        slot = f.read()
    assert "torch " in slot and "commit " in slot and "E1 exit 0" in slot, slot
    assert "capturable" not in slot  # (a CUDA test: not on a CPU)
    assert sorted(os.listdir(out)) == ["e1", "e1.log", "slot.txt"]
    with open(os.path.join(out, "e1", "summary.md"), encoding="utf-8") as f:
        report = f.read()
    assert "| model=gaussian | model=gaussian amp=off tf32=false agent.act_sync_every=1 |" in report
    eta = slot.split("E1 exit 0", 1)[1]
    assert eta.count("== /") == 2 and eta.count("estimate at step") == 2, eta


def test_a_slot_too_short_for_e1_says_so(tmp_path: str) -> None:
    proc, out = _slot(str(tmp_path), 150)
    assert proc.returncode == 0, proc.stderr
    with open(os.path.join(out, "slot.txt"), encoding="utf-8") as f:
        assert re.search(r"E1 left out: [0-9]+ s left", f.read())
    assert not os.path.exists(os.path.join(out, "e1"))
    bad = subprocess.run([SLOT, out, "9m"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "SECONDS: a whole number" in bad.stderr


def test_a_failed_run_brings_back_the_end_of_its_output(tmp_path: str) -> None:
    """Runs that die (here at their start, from a module every train.py of the slot imports
    first) leave their logs on the GPU machine: the slot copies the end of each into OUT."""
    hook = os.path.join(tmp_path, "hook")
    os.makedirs(hook)
    with open(os.path.join(hook, "sitecustomize.py"), "w", encoding="utf-8") as f:
        # (an exit, not an exception: Python's site module reports a sitecustomize's
        # exceptions and goes on)
        dies = (
            "if sys.argv[0].endswith('train.py'):\n    sys.exit('a run that dies on this machine')"
        )
        f.write(f"import sys\n{dies}\n")
    path = os.pathsep.join(filter(None, [hook, os.environ.get("PYTHONPATH")]))
    proc, out = _slot(str(tmp_path), 240, PYTHONPATH=path)
    assert proc.returncode != 0  # (E1's)
    with open(os.path.join(out, "slot.txt"), encoding="utf-8") as f:
        assert re.search(r"E1 exit [1-9]", f.read())
    with open(os.path.join(out, "failures.txt"), encoding="utf-8") as f:
        failures = f.read()
    assert failures.count("SystemExit: a run that dies on this machine") == 2, failures
    assert failures.count("== /") == 2
