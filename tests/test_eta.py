"""The run's time estimate: the work its schedule has left, per phase, times the time per unit
this process has measured. A model fit adds to its own phase's total instead of making the
estimate jump; nothing is estimated before every phase with work left has been timed."""

from __future__ import annotations

import pytest

from mbrl.runtime.eta import RunClock, multiples, work_left

from test_trainer import tiny_config


def test_work_left_follows_the_schedule() -> None:
    """Hopper-like schedule: 1000 steps, 100 random, a model phase every 100 steps from 100,
    G = 20, evaluations every 200 steps and at the end. Counted here by hand."""
    cfg = tiny_config(
        "hopper",
        total_steps=1000,
        **{
            "algorithm.name": "mbpo",
            "algorithm.updates_per_step": 20,
            "mbpo.model_train_freq": 100,
            "eval.every": 200,
        },
    )
    left = work_left(cfg, 350)
    assert left["env"] == 650
    assert left["sac"] == 650 * 20
    assert left["model"] == len([t for t in range(350, 1000) if t % 100 == 0 and t >= 100])
    assert left["eval"] == len([t for t in range(350, 1000) if t % 200 == 0]) + 1
    assert work_left(cfg, 50)["sac"] == 900 * 20  # no updates during the random steps
    assert multiples(100, 0, 100) == 1 and multiples(100, 1, 100) == 0


def test_a_model_fit_moves_the_estimate_by_its_own_time_only() -> None:
    """Two identical fits: just after the second one (one env step later), the estimate is the
    one just before it minus the time the fit took (per-phase rates), where a mean time per
    env step would jump up."""
    cfg = tiny_config(
        "hopper",
        total_steps=2000,
        **{"algorithm.name": "mbpo", "mbpo.model_train_freq": 250, "eval.every": 1000},
    )
    clock = RunClock.start(cfg)
    clock.done.update({"env": 400.0, "sac": 300.0, "model": 1.0, "eval": 1.0})
    grand = {"env": 4.0, "sac": 30.0, "model": 50.0, "eval": 1.0, "checkpoint": 1.0}
    assert clock.ready(500)
    before = clock.seconds_left(grand, 500)
    # The fit at step 500 took as long as the first (50 s), then one env step and 1 update.
    clock.done.update({"model": 2.0, "env": 401.0, "sac": 301.0})
    after = clock.seconds_left({**grand, "model": 100.0, "env": 4.01, "sac": 30.1}, 501)
    assert before["model"] - after["model"] == pytest.approx(50.0)
    step = 4.0 / 400 + 30.0 / 300  # one env step and its update
    assert sum(before.values()) - sum(after.values()) == pytest.approx(50.0 + step)


def test_nothing_is_estimated_before_every_phase_has_been_timed() -> None:
    cfg = tiny_config("hopper", total_steps=2000, **{"algorithm.name": "mbpo"})
    clock = RunClock.start(cfg)
    clock.done.update({"env": 200.0, "sac": 99.0, "model": 1.0, "eval": 1.0})
    assert not clock.ready(300)  # 99 SAC updates: not yet
    clock.done["sac"] = 100.0
    assert clock.ready(300)
    clock.done["model"] = 0.0
    assert not clock.ready(300)  # model phases left, none timed
