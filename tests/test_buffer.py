"""Replay buffer: ring overwrite, sampling with an explicit generator, state round trips."""

from __future__ import annotations

import pytest
import torch

from mbrl.buffer import ReplayBuffer, transition_shapes


def _rows(start: int, n: int, obs_dim: int = 3, act_dim: int = 2) -> dict[str, torch.Tensor]:
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return {
        "obs": ids[:, None].expand(n, obs_dim).clone(),
        "act": ids[:, None].expand(n, act_dim).clone(),
        "rew": ids.clone(),
        "next_obs": ids[:, None].expand(n, obs_dim) + 0.5,
        "terminated": (ids.long() % 2 == 0),
        "truncated": torch.zeros(n, dtype=torch.bool),
    }


def _buffer(capacity: int) -> ReplayBuffer:
    return ReplayBuffer(capacity, transition_shapes(3, 2))


def test_ring_keeps_the_newest_rows() -> None:
    buf = _buffer(5)
    buf.add(_rows(0, 3))
    buf.add(_rows(3, 4))  # wraps: rows 0 and 1 are overwritten by 5 and 6
    assert len(buf) == 5 and buf.ptr == 2 and buf.pushed_in == 7
    assert buf.data["rew"].tolist() == [5.0, 6.0, 2.0, 3.0, 4.0]
    assert buf.data["next_obs"][:, 0].tolist() == [5.5, 6.5, 2.5, 3.5, 4.5]
    assert buf.data["terminated"].tolist() == [False, True, True, False, True]


def test_batch_larger_than_capacity_keeps_its_tail() -> None:
    buf = _buffer(4)
    buf.add(_rows(0, 10))
    assert sorted(buf.data["rew"].tolist()) == [6.0, 7.0, 8.0, 9.0]
    assert buf.pushed_in == 10 and len(buf) == 4


def test_sampling_is_reproducible_and_consistent() -> None:
    buf = _buffer(50)
    buf.add(_rows(0, 30))
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a, b = buf.sample(64, g1), buf.sample(64, g2)
    for key in a:
        assert torch.equal(a[key], b[key])
    # Fields of one sampled row belong to the same transition; only filled rows are drawn.
    assert torch.equal(a["obs"][:, 0], a["rew"]) and torch.equal(a["act"][:, 1], a["rew"])
    assert a["rew"].max() < 30
    assert a["obs"].shape == (64, 3) and a["terminated"].dtype == torch.bool
    assert buf.sampled_out == 128


def test_state_dict_roundtrip_continues_identically() -> None:
    buf = _buffer(8)
    buf.add(_rows(0, 5))
    buf.add(_rows(5, 6))  # wrapped: ptr at 3
    buf.sample(4, torch.Generator().manual_seed(0))
    other = _buffer(8)
    other.load_state_dict(buf.state_dict())
    assert (other.ptr, other.size, other.pushed_in, other.sampled_out) == (3, 8, 11, 4)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    buf.add(_rows(11, 2))
    other.add(_rows(11, 2))
    assert torch.equal(buf.sample(16, g1)["rew"], other.sample(16, g2)["rew"])


def test_load_into_other_capacity_keeps_newest_rows_in_order() -> None:
    buf = _buffer(6)
    buf.add(_rows(0, 9))  # holds 3..8, ring layout [6, 7, 8, 3, 4, 5]
    small = _buffer(4)
    small.load_state_dict(buf.state_dict())
    assert small.data["rew"].tolist() == [5.0, 6.0, 7.0, 8.0] and small.ptr == 0
    big = _buffer(10)
    big.load_state_dict(buf.state_dict())
    assert big.data["rew"][:6].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0] and big.ptr == 6
    big.add(_rows(9, 1))
    assert big.data["rew"][6].item() == 9.0


def test_staleness_and_errors() -> None:
    buf = _buffer(10)
    with pytest.raises(RuntimeError, match="empty"):
        buf.sample(1, torch.Generator())
    buf.add(_rows(0, 10))
    buf.sample(1000, torch.Generator().manual_seed(0))
    age = float(buf.metrics()["staleness"])
    assert 4.0 < age < 6.5  # uniform over ages 1..10: mean 5.5
    with pytest.raises(ValueError, match="positive"):
        _buffer(0)
    with pytest.raises(KeyError, match="fields"):
        buf.add({"obs": torch.zeros(1, 3)})
