"""Shared test set-up: one torch thread per process (fast and stable on small CPUs)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator

import pytest
import torch

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _keep_denormals() -> Iterator[None]:
    """A Trainer turns on denormal flushing for the process (flush_denormal defaults to
    true); each test starts and ends with torch's default."""
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)


@pytest.fixture
def train_cmd() -> list[str]:
    """The user's command line, run as a subprocess."""
    return [sys.executable, os.path.join(ROOT, "scripts", "train.py")]


@pytest.fixture
def host_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records tensor->host conversions made by FlowMBPO's own code (mbrl/, flows/).

    On CUDA each of these is a device sync. torch's optimizers read their host-side step
    counters with .item(); that is not a sync, so calls from inside torch are not counted.
    """
    calls: list[str] = []
    for name in ("item", "cpu", "tolist", "numpy", "__bool__", "__float__", "__int__"):
        original = getattr(torch.Tensor, name)

        def spy(
            self: torch.Tensor, *a: object, _n: str = name, _o: object = original, **k: object
        ) -> object:
            caller = traceback.extract_stack(limit=2)[0].filename.replace(os.sep, "/")
            if "/mbrl/" in caller or "/flows/" in caller:
                calls.append(f"{_n} from {caller}")
            return _o(self, *a, **k)  # type: ignore[operator]

        monkeypatch.setattr(torch.Tensor, name, spy)
    return calls
