"""wandb logging in offline mode: the offline run folder really holds the logged history; a
broken wandb never stops training."""

from __future__ import annotations

import glob
import os
import struct
import time

import pytest

from mbrl.trainer import Trainer

from test_trainer import tiny_config

wandb = pytest.importorskip("wandb")


def _records(path: str) -> list[bytes]:
    """Records of a .wandb file (LevelDB-style log: 32 KiB blocks, 7-byte record headers)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    out, pos, part = [], 7, b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # the rest of a block too small for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        part = chunk if kind in (1, 2) else part + chunk
        if kind in (1, 4):  # a full record, or the last piece of one
            out.append(part)
    return out


def _history(run_dir: str) -> list[dict[str, str]]:
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = glob.glob(os.path.join(run_dir, "wandb", "offline-run-*", "*.wandb"))
    rows = []
    for raw in _records(path):
        rec = pb.Record()  # type: ignore[attr-defined]  # (protobuf makes it at import)
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): i.value_json for i in rec.history.item})
    return rows


def _history_with_eval(run_dir: str, timeout: float = 60.0) -> list[dict[str, str]]:
    """The history once it holds the evaluation row. wandb's service process writes the
    offline file; on a loaded machine its last records can land after ``finish()`` returns."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            rows = _history(run_dir)
        except Exception:  # a record still being written; the last try below raises
            rows = []
        if any("eval/return_mean" in r for r in rows):
            return rows
        time.sleep(0.5)
    return _history(run_dir)


def test_offline_run_holds_the_history(tmp_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = os.path.join(tmp_path, "run")
    cfg = tiny_config(
        "pendulum",
        total_steps=200,
        **{"logger.wandb": True, "logger.wandb_group": "tests", "logger.wandb_tags": ["ci"]},
    )
    Trainer(cfg, run).run()
    history = _history_with_eval(run)
    evals = [h for h in history if "eval/return_mean" in h]
    assert [int(h["_step"]) for h in evals] == [200]
    assert any("learner/q_loss" in h for h in history)
    assert os.path.isfile(os.path.join(run, "wandb_run_id.txt"))


def test_failing_wandb_does_not_stop_training(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no network")

    monkeypatch.setattr(wandb, "init", broken)
    run = os.path.join(tmp_path, "run")
    cfg = tiny_config("pendulum", total_steps=200, **{"logger.wandb": True})
    Trainer(cfg, run).run()
    assert "wandb disabled (RuntimeError: no network)" in caplog.text
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        assert "eval/return_mean" in f.read()


def test_a_batch_of_seeds_logs_each_seed_to_a_wandb_run_of_its_own(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """batch_seeds=2: two wandb runs in one process, each seed's history in its own folder's
    run (not both in the first)."""
    from mbrl.seed_trainer import SeedTrainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = os.path.join(tmp_path, "run")
    cfg = tiny_config("pendulum", total_steps=200, batch_seeds=2, **{"logger.wandb": True})
    SeedTrainer(cfg, run).run()
    ids = []
    for folder in (run, f"{run}_seed1"):
        evals = [h for h in _history_with_eval(folder) if "eval/return_mean" in h]
        assert [int(h["_step"]) for h in evals] == [200], folder
        with open(os.path.join(folder, "wandb_run_id.txt"), encoding="utf-8") as f:
            ids.append(f.read().strip())
    assert ids[0] != ids[1]
