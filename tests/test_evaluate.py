"""scripts/evaluate.py: returns from a checkpoint, video, and clear errors for bad input."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from mbrl.tools.eval_checkpoint import EvaluateError, evaluate, record_video
from mbrl.trainer import Trainer

from test_trainer import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    run = str(tmp_path_factory.mktemp("runs") / "pendulum")
    Trainer(tiny_config("pendulum", total_steps=400), run).run()
    return run


def test_evaluate_prints_returns(finished_run: str) -> None:
    r = evaluate(finished_run, "last", episodes=3, seed=5)
    assert r["step"] == 400 and -2000 < r["eval/return_mean"] <= 0
    assert evaluate(finished_run, "200", 1, 5)["step"] == 200
    cmd = [
        sys.executable,
        os.path.join(ROOT, "scripts", "evaluate.py"),
        finished_run,
        "--ckpt",
        "best",
        "--episodes",
        "2",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "return" in out.stdout and "over 2 episodes" in out.stdout


def test_bad_runs_and_checkpoints_fail_clearly(finished_run: str, tmp_path: str) -> None:
    with pytest.raises(EvaluateError, match="not a FlowMBPO run folder"):
        evaluate(str(tmp_path), "last", 1, 0)
    with pytest.raises(
        EvaluateError, match=r"iteration_999\.pt' does not exist; the run has: ckpt_best"
    ):
        evaluate(finished_run, "999", 1, 0)
    with pytest.raises(EvaluateError, match="use best, last or an env-step count"):
        evaluate(finished_run, "newest", 1, 0)
    broken = os.path.join(tmp_path, "broken")
    shutil.copytree(finished_run, broken)
    with open(os.path.join(broken, "ckpt", "last.pt"), "wb") as f:
        f.write(b"junk")
    with pytest.raises(EvaluateError, match="corrupt"):
        evaluate(broken, "last", 1, 0)
    other = os.path.join(tmp_path, "other")
    Trainer(tiny_config("inverted_pendulum", total_steps=200), other).run()
    shutil.copy(os.path.join(other, "ckpt", "last.pt"), os.path.join(broken, "ckpt", "last.pt"))
    with pytest.raises(EvaluateError, match="written for env 'inverted_pendulum', not 'pendulum'"):
        evaluate(broken, "last", 1, 0)


def test_video_is_written_or_refused_clearly(finished_run: str, tmp_path: str) -> None:
    path = os.path.join(tmp_path, "episode.gif")
    try:
        frames = record_video(finished_run, "last", path, seed=0)
    except EvaluateError as err:  # no GL backend or no pygame on this machine
        assert "cannot render" in str(err) and "video" in str(err)
        return
    assert frames == 201  # Pendulum: reset frame + 200 steps
    from PIL import Image

    # GIF writers merge identical consecutive frames into one longer frame: count by duration.
    with Image.open(path) as gif:
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
    assert 1 < len(durations) <= frames
    unit = min(durations)  # one frame's duration, in the GIF's 10 ms steps
    assert sum(durations) == frames * unit
