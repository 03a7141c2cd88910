"""Logger: jsonl + TensorBoard + text logs, one host transfer per call, resume truncation."""

from __future__ import annotations

import json
import os

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from mbrl.runtime.logger import Logger, to_numbers


def test_to_numbers_keeps_ints_and_order() -> None:
    out = to_numbers({"b": torch.tensor(2.5), "a": 3, "c": torch.tensor([1.0])})
    assert out == {"b": 2.5, "a": 3, "c": 1.0} and list(out) == ["b", "a", "c"]
    assert isinstance(out["a"], int)


def test_logger_writes_all_three_sinks(tmp_path: str) -> None:
    log = Logger(str(tmp_path), tensorboard=True)
    log.log(10, {"learner/q_loss": torch.tensor(0.5), "eval/return_mean": -3.0, "time/env": 1.0})
    log.log(20, {"learner/q_loss": torch.tensor(float("nan"))})
    log.close()
    with open(os.path.join(tmp_path, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert rows[0]["step"] == 10 and rows[0]["learner/q_loss"] == 0.5
    assert rows[1]["learner/q_loss"] is None  # NaN written as null: the file stays valid JSON
    with open(os.path.join(tmp_path, "log", "evaluator", "evaluator.log"), encoding="utf-8") as f:
        assert "step 10 | return_mean -3" in f.read()
    acc = EventAccumulator(os.path.join(tmp_path, "log", "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("learner/q_loss")][:1] == [10]


def test_resume_truncates_what_came_after_the_checkpoint(tmp_path: str) -> None:
    log = Logger(str(tmp_path), tensorboard=False)
    log.log(1, {"learner/x": 1.0})
    state = log.state_dict()
    log.log(2, {"learner/x": 2.0})
    log.close()
    again = Logger(str(tmp_path), tensorboard=False)
    again.load_state_dict(state, step=1)
    again.log(2, {"learner/x": 5.0})
    again.close()
    with open(os.path.join(tmp_path, "metrics.jsonl"), encoding="utf-8") as f:
        assert [json.loads(line)["learner/x"] for line in f] == [1.0, 5.0]
    with open(os.path.join(tmp_path, "log", "learner", "learner.log"), encoding="utf-8") as f:
        assert len(f.readlines()) == 2
