"""Host staging of env transitions: packing, round-robin rows, pinned copies on CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.staging import HostStager

OBS, ACT = 3, 2


def _row(i: int) -> dict[str, np.ndarray | float | bool]:
    obs = np.arange(OBS, dtype=np.float64) + 10 * i
    return {
        "obs": obs,
        "act": np.full(ACT, 0.5 * i, dtype=np.float32),
        "rew": float(i),
        "next_obs": obs + 1,
        "terminated": i % 2 == 1,
        "truncated": i % 3 == 2,
    }


def _fill(device: torch.device, pinned: bool, n: int) -> ReplayBuffer:
    buf = ReplayBuffer(16, transition_fields(OBS, ACT), device)
    shapes = {k: tuple(v.shape[1:]) for k, v in buf.data.items()}
    stager = HostStager(shapes, device, rows=4, pinned=pinned)
    assert stager.host.is_pinned() == (pinned and device.type == "cuda")
    for i in range(n):  # more transitions than staging rows: rows are reused
        buf.add(stager.stage(_row(i)))
    return buf


def _check(buf: ReplayBuffer, n: int) -> None:
    data = {k: v[:n].cpu() for k, v in buf.data.items()}
    for i in range(n):
        row = _row(i)
        torch.testing.assert_close(data["obs"][i], torch.tensor(row["obs"], dtype=torch.float32))
        torch.testing.assert_close(data["act"][i], torch.tensor(row["act"]))
        torch.testing.assert_close(data["next_obs"][i], data["obs"][i] + 1)
        assert float(data["rew"][i]) == row["rew"]
        assert bool(data["terminated"][i]) == row["terminated"]
        assert bool(data["truncated"][i]) == row["truncated"]


def test_transitions_arrive_intact_on_cpu() -> None:
    _check(_fill(torch.device("cpu"), pinned=True, n=10), 10)


@pytest.mark.cuda
@pytest.mark.parametrize("pinned", [pytest.param(True, marks=pytest.mark.mechanism), False])
def test_transitions_arrive_intact_on_cuda(pinned: bool) -> None:
    buf = _fill(torch.device("cuda"), pinned=pinned, n=10)
    torch.cuda.synchronize()
    _check(buf, 10)
