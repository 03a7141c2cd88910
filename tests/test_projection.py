"""The profile report's projection of a whole run: each phase's measured cost per unit of work
times the work the run's schedule does, counted here by hand."""

from __future__ import annotations

import pytest

from mbrl.config import Config
from mbrl.tools.projection import Rates, project

from test_trainer import tiny_config

RATES = Rates(
    env_step=1e-3,
    sac_update=2e-3,
    fit_row_epoch=3e-5,
    rollout_row=4e-6,
    rewarder_phase=0.5,
    eval_episode=0.25,
)


def _cfg(**overrides: object) -> Config:
    settings = {
        "algorithm.name": "mbpo",
        "algorithm.init_steps": 500,
        "algorithm.updates_per_step": 20,
        "mbpo.model_train_freq": 250,
        "mbpo.epoch_length": 1000,
        "eval.every": 1000,
        "eval.episodes": 10,
        "buffer.capacity": 1200,  # reached before the run ends
        "model.max_holdout": 300,  # so is the holdout cap
        "rollout.batch_size": 400,
        "rollout.min_epoch": 0,
        "rollout.max_epoch": 1,
        "rollout.min_length": 1,
        "rollout.max_length": 3,
        "profile.fit_epochs": 7,
    }
    return tiny_config("hopper", total_steps=2000, **(settings | overrides))


def test_projection_follows_the_run_schedule() -> None:
    # Model phases at 500, 750, ..., 1750. Rows: min(step, 1200) less min(20 %, 300) held out.
    rows = [500 - 100, 750 - 150, 1000 - 200, 1200 - 240, 1200 - 240, 1200 - 240]
    # MBPO epochs after the 500 random steps: 0 for steps < 1500 (length 1), then 1 (length 3).
    lengths = [1, 1, 1, 1, 3, 3]
    seconds = project(_cfg(), RATES)
    assert seconds["env"] == pytest.approx(2000 * 1e-3)
    assert seconds["sac"] == pytest.approx((2000 - 500) * 20 * 2e-3)
    assert seconds["eval"] == pytest.approx(2 * 10 * 0.25)  # at 1000 and at the last step
    assert seconds["model"] == pytest.approx(sum(rows) * 7 * 3e-5)
    assert seconds["rollout"] == pytest.approx(sum(400 * n for n in lengths) * 4e-6)
    assert "rewarder" not in seconds  # rewarder.mode none


def test_projection_keeps_the_runs_own_caps() -> None:
    rows = [400, 600, 800, 960, 960, 960]
    capped = project(_cfg(**{"model.max_epochs": 3}), RATES)  # fewer than profile.fit_epochs
    assert capped["model"] == pytest.approx(sum(rows) * 3 * 3e-5)
    limit = 0.12  # seconds: binds from the 600-row fit on (600 * 7 * 3e-5 = 0.126)
    timed = project(_cfg(**{"model.max_seconds": limit}), RATES)
    assert timed["model"] == pytest.approx(400 * 7 * 3e-5 + 5 * limit)
    with_rewarder = project(_cfg(**{"rewarder.mode": "penalty"}), RATES)
    assert with_rewarder["rewarder"] == pytest.approx(6 * 0.5)
    sac = project(_cfg(**{"algorithm.name": "sac"}), RATES)
    assert set(sac) == {"env", "sac", "eval"}
