"""Replay buffer: ring overwrite, live window, sampling with an explicit generator, state round
trips."""

from __future__ import annotations

import pytest
import torch

from mbrl.buffer import ReplayBuffer, transition_fields


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
    return ReplayBuffer(capacity, transition_fields(3, 2))


def _state(buf: ReplayBuffer) -> tuple[int, int, int]:
    s = buf.state_dict()
    return s["ptr"], s["size"], s["pushed_in"]


def test_ring_keeps_the_newest_rows() -> None:
    buf = _buffer(5)
    buf.add(_rows(0, 3))
    buf.add(_rows(3, 4))  # wraps: rows 0 and 1 are overwritten by 5 and 6
    assert _state(buf) == (2, 5, 7)
    rows = buf.rows()  # oldest first, whatever the ring layout
    assert rows["rew"].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert rows["next_obs"][:, 0].tolist() == [2.5, 3.5, 4.5, 5.5, 6.5]
    assert rows["terminated"].tolist() == [True, False, True, False, True]


def test_masked_add_writes_only_kept_rows_without_syncing(host_reads: list[str]) -> None:
    buf = _buffer(6)
    buf.add(_rows(0, 4), mask=torch.tensor([True, False, True, False]))
    buf.add(_rows(10, 5), mask=torch.tensor([True, True, False, True, True]))  # wraps
    assert host_reads == []
    assert _state(buf) == (0, 6, 6)
    assert buf.rows()["rew"].tolist() == [0.0, 2.0, 10.0, 11.0, 13.0, 14.0]
    buf.add(_rows(20, 2), mask=torch.tensor([False, False]))
    assert _state(buf) == (0, 6, 6)
    with pytest.raises(ValueError, match="mask"):
        buf.add(_rows(0, 7), mask=torch.ones(7, dtype=torch.bool))


def test_batch_larger_than_capacity_keeps_its_tail() -> None:
    buf = _buffer(4)
    buf.add(_rows(0, 10))
    assert sorted(buf.rows()["rew"].tolist()) == [6.0, 7.0, 8.0, 9.0]
    assert _state(buf)[1:] == (4, 10)


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
    # Stored oldest first: the copy's ring starts at row 0, reads are by age, not ring row.
    assert (*_state(other), other.sampled_out) == (0, 8, 11, 4)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    buf.add(_rows(11, 2))
    other.add(_rows(11, 2))
    assert torch.equal(buf.sample(16, g1)["rew"], other.sample(16, g2)["rew"])


def test_load_into_other_capacity_keeps_newest_rows_in_order() -> None:
    buf = _buffer(6)
    buf.add(_rows(0, 9))  # holds 3..8, ring layout [6, 7, 8, 3, 4, 5]
    small = _buffer(4)
    small.load_state_dict(buf.state_dict())
    assert small.rows()["rew"].tolist() == [5.0, 6.0, 7.0, 8.0] and _state(small)[0] == 0
    big = _buffer(10)
    big.load_state_dict(buf.state_dict())
    assert big.rows()["rew"].tolist() == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0] and _state(big)[0] == 6
    big.add(_rows(9, 1))
    assert big.rows()["rew"][6].item() == 9.0


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


def test_window_keeps_only_the_newest_rows_live(host_reads: list[str]) -> None:
    buf = _buffer(10)
    buf.add(_rows(0, 7))
    buf.set_window(4)  # narrow: rows 3..6 stay live
    assert host_reads == []
    assert buf.rows()["rew"].tolist() == [3.0, 4.0, 5.0, 6.0]
    buf.add(_rows(7, 2))  # the window slides: 5..8
    assert buf.rows()["rew"].tolist() == [5.0, 6.0, 7.0, 8.0]
    buf.set_window(6)  # widen: rows that left the window do not come back
    assert buf.rows()["rew"].tolist() == [5.0, 6.0, 7.0, 8.0]
    buf.add(_rows(9, 3), mask=torch.tensor([True, False, True]))  # wraps the ring
    live = buf.rows()["rew"].tolist()
    assert live == [5.0, 6.0, 7.0, 8.0, 9.0, 11.0] and len(buf) == 6
    drawn = buf.sample(2000, torch.Generator().manual_seed(0))["rew"]
    assert set(drawn.tolist()) == set(live)  # every live row, nothing else
    with pytest.raises(ValueError, match="window"):
        buf.set_window(11)


def test_windowed_state_roundtrip_continues_identically() -> None:
    buf = _buffer(8)
    buf.add(_rows(0, 11))
    buf.set_window(5)
    other = _buffer(8)
    other.load_state_dict(buf.state_dict())
    assert other.window == 5 and other.rows()["rew"].tolist() == [6.0, 7.0, 8.0, 9.0, 10.0]
    for b in (buf, other):
        b.add(_rows(11, 3))
        b.set_window(7)
        b.add(_rows(14, 1))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert buf.rows()["rew"].tolist() == other.rows()["rew"].tolist()
    assert torch.equal(buf.sample(64, g1)["rew"], other.sample(64, g2)["rew"])


def test_draws_are_uniform_with_replacement_over_the_live_rows() -> None:
    """MBPO's rollout starts and SAC's batches: ``np.random.randint(0, size, n)``, uniform
    with replacement over the rows held. A wrapped ring of 10 holds rows 5-14; 100 000 draws
    hit each about 10 000 times (binomial sd 95: each within 5 sd), and no other row."""
    buf = _buffer(10)
    buf.add(_rows(0, 15))
    drawn = buf.sample(100_000, torch.Generator().manual_seed(0), ("rew",))["rew"].long()
    counts = torch.bincount(drawn, minlength=15)
    assert counts[:5].sum() == 0 and bool(((counts[5:] - 10_000).abs() < 5 * 95).all())
