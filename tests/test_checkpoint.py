"""Checkpoint files: atomic writes, links, and clear errors for bad files."""

from __future__ import annotations

import os

import pytest
import torch

from mbrl.runtime.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    CheckpointManager,
    load,
    save_atomic,
)


def _state(step: int) -> dict[str, object]:
    return {
        "format": FORMAT_VERSION,
        "env": "hopper",
        "step": step,
        "w": torch.arange(3.0),
        "buffers": {"real": torch.zeros(4)},
    }


def test_manager_writes_last_snapshot_and_best(tmp_path: str) -> None:
    mgr = CheckpointManager(str(tmp_path), snapshots=True, buffer_in_snapshots=True)
    mgr.save(_state(100), 100, is_best=True)
    mgr.save(_state(200), 200, is_best=False)
    ckpt = os.path.join(tmp_path, "ckpt")
    assert sorted(os.listdir(ckpt)) == [
        "ckpt_best.pt",
        "iteration_100.pt",
        "iteration_200.pt",
        "last.pt",
    ]
    assert load(os.path.join(ckpt, "last.pt"))["step"] == 200
    assert load(os.path.join(ckpt, "ckpt_best.pt"))["step"] == 100  # untouched by the later save
    assert load(os.path.join(ckpt, "iteration_100.pt"))["step"] == 100


def test_errors_name_the_file_and_the_problem(tmp_path: str) -> None:
    path = os.path.join(tmp_path, "x.pt")
    with pytest.raises(CheckpointError, match="does not exist"):
        load(path)
    with open(path, "wb") as f:
        f.write(b"\x00garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        load(path)
    save_atomic({"something": 1}, path)
    with pytest.raises(CheckpointError, match="not a FlowMBPO checkpoint"):
        load(path)
    save_atomic({**_state(1), "format": FORMAT_VERSION - 1}, path)
    with pytest.raises(CheckpointError, match=f"has format {FORMAT_VERSION - 1}; this Flow"):
        load(path)
    save_atomic(_state(1), path)
    with pytest.raises(CheckpointError, match="written for env 'hopper', not 'ant'"):
        load(path, env_name="ant")
    assert load(path, env_name="hopper", mmap=True)["step"] == 1
    assert os.listdir(tmp_path) == ["x.pt"]  # no temp files left behind


def test_bytes_changed_inside_a_whole_checkpoint_are_refused(tmp_path: str) -> None:
    """One byte flipped in a tensor's record: torch.load would read the changed weight as it
    is (checked here); the record's CRC-32, which torch.save writes, no longer matches, and
    load refuses the file by name and record."""
    import zipfile

    path = os.path.join(tmp_path, "last.pt")
    state = {**_state(1), "weights": torch.arange(4096, dtype=torch.float32)}
    save_atomic(state, path)
    with zipfile.ZipFile(path) as z:
        (record,) = [i for i in z.infolist() if i.file_size == 4096 * 4]
    with open(path, "rb") as f:
        data = bytearray(f.read())
    # The record's bytes start after its local header: 30 bytes, its name, its extra field
    # (torch pads the extra field so that the data are aligned).
    start = record.header_offset
    name, extra = (
        int.from_bytes(data[start + 26 : start + 28], "little"),
        int.from_bytes(data[start + 28 : start + 30], "little"),
    )
    data[start + 30 + name + extra + 4 * 1000] ^= 0xFF  # (a byte of weights[1000])
    bad = os.path.join(tmp_path, "bad.pt")
    with open(bad, "wb") as f:
        f.write(data)
    read = torch.load(bad, weights_only=False)["weights"]
    assert torch.nonzero(read != state["weights"]).flatten().tolist() == [1000]  # (unnoticed)
    with pytest.raises(
        CheckpointError, match=rf"is corrupt: the bytes of its record '{record.filename}'"
    ):
        load(bad)
    assert load(path)["step"] == 1  # (the good file still loads)
