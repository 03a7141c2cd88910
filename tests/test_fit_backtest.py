"""scripts/eta_backtest.py: the time-left rule's foresight of recorded runs' model fits, checked
against the rule written out by hand on a bundle made here."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
from omegaconf import OmegaConf

from mbrl.tools.fit_backtest import bundle_runs, projected_error, split_at

from test_trainer import tiny_config

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
# (step, training rows, epochs): the first fit, then 11 later ones
FITS = [(5000, 4000, 200), (5250, 4200, 60), (5500, 4400, 30)] + [
    (5750 + 250 * i, 4600 + 200 * i, e) for i, e in enumerate([25, 9, 7, 14, 7, 7, 30, 7, 8])
]


def _bundle(path: str) -> None:
    """A seeds bundle of one MBPO run (MBPO's patience 5: a plateau of 20 epochs)."""
    cfg = tiny_config("hopper", **{"algorithm.name": "mbpo"})
    files = {
        "runs/model-gaussian/seed_0/config.yaml": OmegaConf.to_yaml(cfg),
        "runs/model-gaussian/seed_0/metrics.jsonl": "".join(
            json.dumps({"step": s, "model/train_rows": r, "model/epochs": e}) + "\n"
            for s, r, e in FITS
        ),
        "runs/sac/seed_0/metrics.jsonl": json.dumps({"step": 100}) + "\n",  # (no config: left)
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_the_rule_is_replayed_on_the_fits_before_a_point(tmp_path: str) -> None:
    """After the second later fit: the next later fit 30 % of the way from the two so far
    (their mean) to the plateau of 20 epochs, each after it 30 % of what is left; against
    what the rest took."""
    path = os.path.join(tmp_path, "metrics.tar.gz")
    _bundle(path)
    (run,) = bundle_runs(path)
    assert run.name == "model-gaussian/seed_0" and len(run.fits) == 12
    made = split_at(run, "n2")
    assert made == 3 and split_at(run, "n4") is None  # (8 fits must come after)
    assert split_at(run, "5k") is None  # (only the first fit before it)
    start = (60 + 30) / 2
    foreseen = sum((20 + (start - 20) * 0.7 ** (j + 1)) * r for j, (_, r, _) in enumerate(FITS[3:]))
    took = sum(rows * epochs for _, rows, epochs in FITS[3:])
    assert projected_error(run, made) == pytest.approx(foreseen / took - 1)


def test_the_script_prints_a_table_and_refuses_a_bad_point(tmp_path: str) -> None:
    path = os.path.join(tmp_path, "metrics.tar.gz")
    _bundle(path)
    script = os.path.join(ROOT, "scripts", "eta_backtest.py")
    out = subprocess.run(
        [sys.executable, script, path, path, "--points", "n2,n4"],  # (twice: counted once)
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (row,) = [line for line in out.splitlines() if "| n2 |" in line]
    assert "model-gaussian" in row and "| 1 |" in row
    assert "| n4 |" not in out  # (7 fits after it: not counted)
    assert "left out: " in out and "the same run as " in out
    bad = subprocess.run(
        [sys.executable, script, path, "--points", "eight"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "point 'eight'" in bad.stderr
