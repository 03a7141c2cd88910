"""Shared test set-up: one torch thread per process (fast and stable on small CPUs); the CUDA
tests (marker ``cuda``) in strict mode, the first test of each CUDA mechanism (marker
``mechanism``) before all others."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator

import pytest
import torch

torch.set_num_threads(1)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` are skipped without a CUDA device. One test per CUDA mechanism
    runs first (stable otherwise): a GPU check cut short by its time limit has still given a
    verdict on each mechanism."""
    if not torch.cuda.is_available():
        for item in items:
            if item.get_closest_marker("cuda") is not None:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
    items.sort(key=lambda item: item.get_closest_marker("mechanism") is None)


@pytest.fixture(autouse=True)
def _strict_on_cuda(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA test fails if a compile or CUDA-graph fallback would have run it slower:
    FLOWMBPO_STRICT=1 (mbrl.compiled.strict) for every test marked ``cuda``."""
    if request.node.get_closest_marker("cuda") is not None:
        monkeypatch.setenv("FLOWMBPO_STRICT", "1")


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
            self: torch.Tensor,
            *a: object,
            _n: str = name,
            _o: Callable[..., object] = original,
            **k: object,
        ) -> object:
            caller = traceback.extract_stack(limit=2)[0].filename.replace(os.sep, "/")
            if "/mbrl/" in caller or "/flows/" in caller:
                calls.append(f"{_n} from {caller}")
            return _o(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, spy)
    return calls
