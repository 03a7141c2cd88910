"""scripts/probe.py: the model's one-step errors and the critics' values on the policy's own
episodes; the soft return against its definition, summed term by term."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from mbrl.tools.probing import Episodes, first_halves, soft_returns
from mbrl.trainer import Trainer

from test_trainer import tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(ROOT, "scripts", "probe.py")


def _episodes(lengths: list[int], terminated: list[bool]) -> Episodes:
    g = torch.Generator().manual_seed(0)
    n = sum(lengths)
    last = torch.zeros(n, dtype=torch.bool)
    term = torch.zeros(n, dtype=torch.bool)
    end = -1
    for length, t in zip(lengths, terminated, strict=True):
        end += length
        last[end], term[end] = True, t
    rand = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    return Episodes(rand(n, 3), rand(n, 2), rand(n), rand(n, 3), rand(n), term, last)


def test_soft_return_is_the_discounted_sum_of_rewards_and_later_entropy_bonuses() -> None:
    """G_t = sum_k gamma^k r_{t+k} - alpha sum_{k>=1} gamma^k log pi_{t+k}, within its episode."""
    ep = _episodes([5, 1, 7], [True, False, False])
    alpha, gamma = 0.3, 0.9
    got = soft_returns(ep, alpha, gamma)
    starts, ends = [0, 5, 6], [4, 5, 12]
    for s, e in zip(starts, ends, strict=True):
        for t in range(s, e + 1):
            want = sum(gamma ** (u - t) * float(ep.rew[u]) for u in range(t, e + 1))
            bonus = sum(gamma ** (u - t) * float(ep.log_prob[u]) for u in range(t + 1, e + 1))
            want -= alpha * bonus
            assert float(got[t]) == pytest.approx(want, rel=1e-5, abs=1e-5), (t, s, e)
    sums = [float(ep.rew[s : e + 1].sum()) for s, e in zip(starts, ends, strict=True)]
    assert ep.returns == pytest.approx(sums)


def test_first_halves_keep_each_episodes_first_half() -> None:
    ep = _episodes([4, 1, 5], [False, True, False])
    assert first_halves(ep).tolist() == [1, 1, 0, 0, 1, 1, 1, 1, 0, 0]


@pytest.fixture(scope="module")
def mbpo_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    run = str(tmp_path_factory.mktemp("runs") / "hopper")
    settings = {
        "algorithm.name": "mbpo",
        "algorithm.init_steps": 200,
        "mbpo.model_train_freq": 100,
        "mbpo.epoch_length": 200,
        "rollout.batch_size": 200,
        "model.max_epochs": 3,
    }
    Trainer(tiny_config("hopper", total_steps=400, **settings), run).run()
    return run


def test_probe_prints_the_model_and_critics_report(mbpo_run: str) -> None:
    cmd = [sys.executable, PROBE, mbpo_run, "--episodes", "2", "--draws", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "[last, step 400]" in text and "2 episodes with actions drawn from the policy" in text
    for line in ("  reward       env ", "  next state   mean |error|", "  termination  the env"):
        assert line in text, text
    found = re.search(
        r"Q\(s, a\) (-?[\d.]+) against the discounted soft return that followed (-?[\d.]+): "
        r"the critics (over|under)-estimate it by ([\d.]+)",
        text,
    )
    assert found, text
    q, ret, way, by = float(found[1]), float(found[2]), found[3], float(found[4])
    assert way == ("over" if q > ret else "under") and by == pytest.approx(abs(q - ret), abs=0.11)


def test_probe_refuses_a_missing_checkpoint_in_one_line(mbpo_run: str) -> None:
    out = subprocess.run(
        [sys.executable, PROBE, mbpo_run, "--ckpt", "999"], capture_output=True, text=True
    )
    assert out.returncode == 2 and out.stderr.startswith("error: checkpoint ")
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_snapshot_before_any_fit_or_update_says_so(mbpo_run: str, tmp_path: str) -> None:
    """A model not fitted yet and critics never updated (a snapshot of the random steps)
    are named as such, not reported as errors of a trained run."""
    import shutil

    from mbrl.runtime.checkpoint import load, save_atomic

    run = os.path.join(tmp_path, "run")
    shutil.copytree(mbpo_run, run)
    state = load(os.path.join(run, "ckpt", "iteration_200.pt"))
    state["algorithm"]["model_trainer"]["fits"], state["updates"] = 0, 0  # (as at step 100)
    save_atomic(state, os.path.join(run, "ckpt", "iteration_100.pt"))
    cmd = [sys.executable, PROBE, run, "--ckpt", "100", "--episodes", "1", "--draws", "2"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "model: not fitted yet at this step" in out.stdout and "  reward " not in out.stdout
    assert "critics: not trained yet at this step (no SAC update yet)" in out.stdout
    assert "Q(s, a)" not in out.stdout
