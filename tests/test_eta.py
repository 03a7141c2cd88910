"""The one projection of a run's time (mbrl.runtime.eta.time_left), which the training ETA
and profile=true's report share: the work the schedule has left, per phase, times seconds per
unit of work. Model fits grow with the data (rows x epochs); the first fit, from random
weights, is counted apart from the later ones, whose epochs settle from the last three's mean
toward a plateau. Recorded Hopper runs (CPU and GPU) check the estimate against the time they
then took."""

from __future__ import annotations

import json
import os
import tarfile
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from mbrl.config import Config
from mbrl.runtime.checkpoint import load
from mbrl.runtime.eta import (
    TIMERS,
    FitEpochs,
    RunClock,
    Work,
    later_text,
    phases_left,
    plateau,
    time_left,
    whole_run,
)
from mbrl.runtime.validate import validate
from mbrl.tools.eta_replay import clock_at, whole_intervals
from mbrl.trainer import Trainer

from test_trainer import _rows, tiny_config

RATES = {
    "env": 1e-3,
    "sac": 2e-3,
    "model": 3e-5,
    "rollout": 4e-6,
    "rewarder": 0.5,
    "eval": 0.25,
    "checkpoint": 0.125,
}


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
    }
    return tiny_config("hopper", total_steps=2000, **(settings | overrides))


# Model phases at 500, 750, ..., 1750. Rows: min(step, 1200) less min(20 %, 300) held out.
ROWS = [500 - 100, 750 - 150, 1000 - 200, 1200 - 240, 1200 - 240, 1200 - 240]
# MBPO epochs after the 500 random steps: 0 for steps < 1500 (length 1), then 1 (length 3).
LENGTHS = [1, 1, 1, 1, 3, 3]


def test_time_left_follows_the_schedule() -> None:
    """Counted here by hand: the whole run, and from a step in its middle (later fits at the
    plateau, 4 x MBPO's patience 5: 20 epochs each)."""
    seconds = time_left(_cfg(), 0, RATES, FitEpochs(first=40, last=20))
    assert seconds["env"] == pytest.approx(2000 * 1e-3)
    assert seconds["sac"] == pytest.approx((2000 - 500) * 20 * 2e-3)
    assert seconds["eval"] == pytest.approx(2 * 10 * 0.25)  # at 1000 and at the last step
    assert seconds["checkpoint"] == pytest.approx(2 * 0.125)
    fits = ROWS[0] * 40 + sum(ROWS[1:]) * 20  # the first fit from random weights, then later ones
    assert seconds["model"] == pytest.approx(fits * 3e-5)
    assert seconds["rollout"] == pytest.approx(sum(400 * n for n in LENGTHS) * 4e-6)
    assert "rewarder" not in seconds  # rewarder.mode none
    later = time_left(_cfg(), 1100, RATES, FitEpochs(first=40, last=20))  # phases 1250..1750
    assert later["model"] == pytest.approx(sum(ROWS[3:]) * 20 * 3e-5)
    assert later["sac"] == pytest.approx(900 * 20 * 2e-3) and later["env"] == pytest.approx(0.9)
    assert set(later) == phases_left(_cfg(), 1100)
    at_a_phase = time_left(_cfg(), 1250, RATES, FitEpochs(40, 20))  # (its fit is still to come)
    assert at_a_phase["model"] == later["model"]


def test_time_left_keeps_the_runs_own_caps() -> None:
    capped = time_left(_cfg(**{"model.max_epochs": 3}), 0, RATES, FitEpochs(40, 20))
    assert capped["model"] == pytest.approx(sum(ROWS) * 3 * 3e-5)
    limit = 0.12  # seconds: binds from the 600-row fit on (600 * 20 * 3e-5 = 0.36)
    timed = time_left(_cfg(**{"model.max_seconds": limit}), 0, RATES, FitEpochs(7, 20))
    assert timed["model"] == pytest.approx(400 * 7 * 3e-5 + 5 * limit)
    with_rewarder = time_left(_cfg(**{"rewarder.mode": "penalty"}), 0, RATES, FitEpochs(7, 7))
    assert with_rewarder["rewarder"] == pytest.approx(6 * 0.5)
    sac = time_left(_cfg(**{"algorithm.name": "sac"}), 0, RATES, FitEpochs(7, 7))
    assert (
        set(sac)
        == {"env", "sac", "eval", "checkpoint"}
        == phases_left(_cfg(**{"algorithm.name": "sac"}), 0)
    )
    # No SAC updates at all: no SAC phase to time, so none the estimate waits for.
    no_updates = _cfg(**{"algorithm.updates_per_step": 0})
    assert "sac" not in set(time_left(no_updates, 0, RATES, FitEpochs(7, 7)))
    assert set(time_left(no_updates, 0, RATES, FitEpochs(7, 7))) == phases_left(no_updates, 0)


def _fit(rows: int, epochs: float) -> dict[str, float]:
    """The metrics of a model phase the estimate reads."""
    return {
        "model/train_rows": rows,
        "model/epochs": epochs,
        "rollout/start_states": 400,
        "rollout/length": 1,
    }


def test_epochs_per_fit_are_measured_the_first_fit_apart() -> None:
    """The first fit's epochs as it ran; the later fits' level the mean of the last three."""
    work = Work()
    assert work.epochs() == FitEpochs(0, 0)
    work.model_phase(_fit(400, 150), rewarder=False)  # the first fit: from random weights
    assert work.epochs() == FitEpochs(150, 150)  # (it stands for the later ones until one ran)
    work.model_phase(_fit(600, 10), rewarder=False)
    work.model_phase(_fit(800, 30), rewarder=False)
    assert work.epochs() == FitEpochs(150, 20) and work.later == (2, 40.0)
    work.model_phase(_fit(960, 36), rewarder=False)
    work.model_phase(_fit(960, 51), rewarder=False)
    assert work.epochs() == FitEpochs(150, (30 + 36 + 51) / 3)  # (the last three)
    assert work.done["model"] == 400 * 150 + 600 * 10 + 800 * 30 + 960 * 36 + 960 * 51
    assert work.done["rollout"] == 5 * 400


def test_later_fits_settle_from_the_last_three_toward_the_plateau() -> None:
    """Counted by hand: the next later fit 30 % of the way from the last three's mean to the
    plateau (4 x patience; at least patience + 2), each after it 30 % of what is left."""
    assert [plateau(_cfg(**{"model.patience": p})) for p in (0, 1, 5)] == [2, 4, 20]
    seconds = time_left(_cfg(), 0, RATES, FitEpochs(first=40, last=50))
    later = [20 + 30 * 0.7 ** (j + 1) for j in range(5)]  # 41, 34.7, 30.29, ...
    fits = ROWS[0] * 40 + sum(r * e for r, e in zip(ROWS[1:], later, strict=True))
    assert seconds["model"] == pytest.approx(fits * 3e-5)
    below = time_left(_cfg(), 0, RATES, FitEpochs(first=40, last=10))  # (never below it)
    assert below["model"] == pytest.approx((ROWS[0] * 40 + sum(ROWS[1:]) * 20) * 3e-5)
    short = time_left(_cfg(**{"model.patience": 1}), 1100, RATES, FitEpochs(40, 10))
    assert short["model"] == pytest.approx(960 * (3 * 4 + 6 * (0.7 + 0.49 + 0.343)) * 3e-5)


def test_the_plateau_is_the_runs_own_once_its_fits_have_settled() -> None:
    """Past its first 16 later fits (the transient), once 4 more have run, the plateau is the
    mean epochs of the later fits after the 16th (within the early stop's fewest and 4 x
    patience): Walker2d's fits settle at the early stop's 7 epochs, Hopper's about 20."""
    cfg = _cfg()  # (MBPO's patience 5: fewest 7, at most 20)
    work = Work()
    work.model_phase(_fit(400, 150), rewarder=False)
    for e in [60.0, 45, 30, 25, 22, 18, 30, 14, 12, 9, 11, 8, 7, 9, 7, 8]:  # the transient
        work.model_phase(_fit(600, e), rewarder=False)
    settled = [7.0, 9, 7]
    for e in settled:
        work.model_phase(_fit(600, e), rewarder=False)
    assert work.epochs().settled is None and plateau(cfg, work.epochs()) == 20  # (3 of 4)
    work.model_phase(_fit(600, 12), rewarder=False)
    settled.append(12)
    assert work.epochs().settled == sum(settled) / 4 == 8.75
    assert plateau(cfg, work.epochs()) == 8.75
    assert plateau(_cfg(**{"model.patience": 6}), work.epochs()) == 8.75  # (fewest 8, most 24)
    assert plateau(_cfg(**{"model.patience": 7}), work.epochs()) == 9  # (fewest: 9)
    assert work.epochs().last == (9 + 7 + 12) / 3
    for e in [40.0] * 4:
        work.model_phase(_fit(600, e), rewarder=False)
    assert work.epochs().settled == (35 + 160) / 8 and plateau(cfg, work.epochs()) == 20  # (cap)
    walker = FitEpochs(150, last=10, settled=7.0)  # from 10 epochs toward 7
    seconds = time_left(cfg, 1100, RATES, walker)["model"]  # (phases at 1250, 1500, 1750)
    assert seconds == pytest.approx(960 * (3 * 7 + 3 * (0.7 + 0.49 + 0.343)) * 3e-5)


def test_at_the_plateau_a_model_fit_moves_the_estimate_by_its_own_time_only() -> None:
    """Later fits at the plateau, and one more that takes what the estimate assumed (the
    plateau's epochs): just after it (one env step later), the estimate is the one just before
    it less the model phase's time and the step's. (Above the plateau a fit moves the later
    ones' start too: the last three's mean.)"""
    cfg = _cfg(**{"model.patience": 1})  # (a plateau of 4 epochs)
    clock = RunClock(cfg)
    clock.work.done.update({"env": 1250.0, "sac": 15000.0, "eval": 10.0, "checkpoint": 1.0})
    for rows, epochs in zip(ROWS[:3], (40, 4, 4), strict=True):  # fits at 500, 750, 1000
        clock.work.model_phase(_fit(rows, epochs), rewarder=False)
    work = clock.work.done
    assert clock.ready(1250)
    before = clock.seconds_left({p: RATES[p] * work[p] for p in work}, 1250)  # (all at rate)
    clock.work.model_phase(_fit(ROWS[3], 4), rewarder=False)  # at 1250
    clock.work.done.update({"env": 1251.0, "sac": 15020.0})
    after = clock.seconds_left({p: RATES[p] * work[p] for p in work}, 1251)
    fit = ROWS[3] * 4 * RATES["model"]
    assert before["model"] - after["model"] == pytest.approx(fit)
    phase = fit + 400 * RATES["rollout"]
    step = RATES["env"] + 20 * RATES["sac"]
    assert sum(before.values()) - sum(after.values()) == pytest.approx(phase + step)


def test_nothing_is_estimated_before_every_phase_has_been_timed() -> None:
    """... and before a fit after the first has said how many epochs the later ones take."""
    clock = RunClock(_cfg())
    clock.work.done.update({"env": 800.0, "sac": 99.0, "eval": 10.0, "checkpoint": 1.0})
    clock.work.model_phase(_fit(400, 40), rewarder=False)
    clock.work.done["sac"] = 100.0
    assert not clock.ready(800)  # one fit: not yet
    clock.work.model_phase(_fit(600, 20), rewarder=False)
    clock.work.done["sac"] = 99.0
    assert not clock.ready(800)  # 99 SAC updates: not yet
    clock.work.done["sac"] = 100.0
    assert clock.ready(800)
    clock.work.done["checkpoint"] = 0.0
    assert not clock.ready(800)  # checkpoints left, none timed
    assert not RunClock(_cfg(**{"profile.enabled": True})).ready(600)  # a window: never


# A small Pendulum MBPO run whose model phases come every 100 steps from step 100 on (not once
# an episode has ended)
SMALL_MBPO = {
    "algorithm.name": "mbpo",
    "mbpo.model_train_freq": 100,
    "rollout.batch_size": 200,
    "mbpo.real_data": "step",
}


def test_a_resumed_run_estimates_from_its_first_step(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its checkpoint holds the rates and the fits' epochs so far: the estimate is printed
    before this process has timed anything (no model fit, evaluation or 100 updates)."""
    run = os.path.join(tmp_path, "run")
    mbpo = SMALL_MBPO | {"model.max_epochs": 3, "eval.every": 150}
    first = Trainer(tiny_config("pendulum", total_steps=300, **mbpo), run)
    first.run()
    assert first.clock.work.fits == 2 and first.clock.work.later == (1, 3.0)
    capsys.readouterr()
    resumed = Trainer(tiny_config("pendulum", total_steps=600, resume=run, **mbpo), run)
    assert resumed.clock.ready(300) and resumed.clock.work.epochs().last == 3.0
    assert resumed.clock.work.last == [3.0] and resumed.clock.work.settled == (0, 0.0)
    shown_at: list[int] = []

    def note() -> None:  # (the step hook runs after each step's estimate)
        if resumed.clock.shown and not shown_at:
            shown_at.append(resumed.env_steps)

    resumed.step_hook = note
    resumed.run()
    # Without the saved rates: not before step 450's evaluation (and 100 updates, step 400).
    assert shown_at == [301]
    err = capsys.readouterr().err
    assert "estimated time to finish: about" in err and "from before the resume at first" in err
    assert resumed.clock.work.fits == 5  # at 100 and 200, then 300, 400 and 500


def test_a_fit_paused_by_a_stop_is_the_work_of_the_process_that_timed_it(tmp_path: str) -> None:
    """A stop pauses a model fit after two epochs; the resumed run reports the fit's epochs
    all together, but its timer holds only the rest. Each process's model rate is its own
    timer's seconds over the row-epochs it ran: the pausing one counts the paused epochs,
    the resuming one leaves them out (counted twice, the resumed run's rate fell to half on
    a real run and its estimate of the fits with it)."""
    run = os.path.join(tmp_path, "run")
    mbpo = SMALL_MBPO | {"model.max_epochs": 6, "model.patience": 6}  # (every fit: 6 epochs)
    first = Trainer(tiny_config("pendulum", total_steps=400, **mbpo), run)
    calls = [0]

    def stop() -> bool:  # (at step 200: once after the step, then after each fit epoch)
        calls[0] += first.env_steps == 200
        return calls[0] >= 3

    first.warm_up()
    first.begin(shown=False)
    try:
        assert first._loop(stop)
        first.stop("test")
    finally:
        first.end()
    state = load(os.path.join(run, "ckpt", "last.pt"))
    paused = state["algorithm"]["model_trainer"]["paused"]
    assert paused["epoch"] == 2
    rows = int(paused["train_idx"].shape[0])
    saved = state["clock"]["rates"]["model"]
    ran = first.clock.work.done["model"] + rows * 2  # (the fit at 100, and two epochs at 200)
    assert saved == pytest.approx(first.timer.grand["model"] / ran)

    resumed = Trainer(tiny_config("pendulum", total_steps=400, resume=run, **mbpo), run)
    assert resumed.clock.work.resumed == rows * 2
    resumed.run()
    fits = [r for r in _rows(run) if "model/epochs" in r and r["step"] >= 200]
    assert [r["model/epochs"] for r in fits] == [6, 6]  # (the resumed fit, then the one at 300)
    reported = sum(r["model/epochs"] * r["model/train_rows"] for r in fits)
    assert resumed.clock.work.done["model"] == reported - rows * 2


def test_a_fit_paused_twice_counts_each_process_its_own_part() -> None:
    """A process that resumed a paused fit (600 row-epochs run before) and is stopped in it
    again: its rate is its own seconds over its own 400 row-epochs, not over all 1000."""
    clock = RunClock(_cfg())
    clock.load_state_dict(None, fits=1, paused=600)
    grand = dict.fromkeys(("env", "sac", "model", "rollout", "eval", "checkpoint"), 0.0)
    grand["model"] = 2.0
    assert clock.state_dict(grand, paused=600 + 400)["rates"]["model"] == pytest.approx(2 / 400)


def test_the_later_fits_travel_with_the_checkpoint() -> None:
    """The last three later fits and the settled mean come back from a checkpoint's state;
    one written before they were saved (its later fits' sum and rows instead) still loads."""
    work = Work()
    for e in [150.0, *[30.0] * 16, 8, 9, 7, 12, 10]:  # the first, 16 in the transient, 5 more
        work.model_phase(_fit(600, e), rewarder=False)
    clock = RunClock(_cfg(), work=work)
    state = clock.state_dict(dict.fromkeys(("env", "model"), 1.0))
    again = RunClock(_cfg())
    again.load_state_dict(state, fits=22)
    assert again.work.epochs() == work.epochs() == FitEpochs(150, (7 + 12 + 10) / 3, 46 / 5)
    old = {k: v for k, v in state.items() if k not in ("last", "settled")}
    older = RunClock(_cfg())
    older.load_state_dict(old | {"later_rows": (12_600.0, 252_000.0)}, fits=22)
    assert older.work.epochs() == FitEpochs(150, (30 * 16 + 46) / 21)  # (their mean so far)


def test_the_estimate_says_where_later_fits_start_and_settle() -> None:
    cfg = _cfg()
    text = later_text(FitEpochs(100, 45), cfg, 5)
    assert text == (
        "later fits from 45 epochs (the last 3's mean) to 20 (4 x model.patience), "
        "30 % nearer each fit"
    )
    assert "(the one so far)" in later_text(FitEpochs(100, 45), cfg, 1)
    own = later_text(FitEpochs(100, 12, settled=8.4), cfg, 30)
    assert own.startswith("later fits from 12 epochs") and "to 8 (their mean past the 16th)" in own
    below = later_text(FitEpochs(100, 12), cfg, 30)
    assert below == "later fits 20 epochs each (4 x model.patience)"
    # Within the run's own model.max_epochs: every later fit at a cap below both, or some.
    cfg.model.max_epochs = 3
    assert later_text(FitEpochs(100, 12), cfg, 30) == "later fits 3 epochs each (model.max_epochs)"
    cfg.model.max_epochs = 30
    assert later_text(FitEpochs(100, 45), cfg, 5) == (
        "later fits from 45 epochs (the last 3's mean) to 20 (4 x model.patience), "
        "30 % nearer each fit, at most 30 each (model.max_epochs)"
    )
    cfg.model.max_epochs = None
    work = Work()
    for e in (5.0, 5.0):  # a window's two fits, capped at 5 epochs
        work.model_phase(_fit(600, e), rewarder=False)
    work.done.update({"env": 1.0, "sac": 1.0, "eval": 1.0, "checkpoint": 1.0})
    ones = dict.fromkeys(("env", "sac", "model", "rollout", "eval", "checkpoint"), 1.0)
    _, how = whole_run(cfg, work, ones, cap=5)
    assert how == (
        "the first fit 5 epochs (capped at 5 in the window: fewer than a run's), "
        "later fits 20 epochs each (4 x model.patience)"
    )


# Recorded runs: Hopper-v4, MBPO's settings, each bundle a tar.gz of run folders.
DOCS = os.path.join(os.path.dirname(__file__), os.pardir, "docs")
CPU_BUNDLE = os.path.join(DOCS, "campaign_cpu", "metrics.tar.gz")
GPU_BUNDLE = os.path.join(DOCS, "gpu", "2026-11-26-h200", "seeds", "metrics.tar.gz")


def _recorded(bundle: str, run: str, into: str) -> tuple[Config, list[dict[str, Any]]]:
    """One run of a bundle: its config (on this machine's CPU, to the last step it logged)
    and its metrics."""
    with tarfile.open(bundle) as tar:
        names = [f"runs/{run}/config.yaml", f"runs/{run}/metrics.jsonl"]
        tar.extractall(into, members=[tar.getmember(n) for n in names], filter="data")
    with open(os.path.join(into, names[1]), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    raw = OmegaConf.load(os.path.join(into, names[0]))
    assert isinstance(raw, DictConfig)
    raw.device, raw.resume = "cpu", None
    raw.total_steps = max(r["step"] for r in rows if "time/wall" in r)
    return validate(raw), rows


@pytest.mark.parametrize(
    ("bundle", "run"),
    [(CPU_BUNDLE, "model-flow/seed_0"), (GPU_BUNDLE, "model-flow/seed_1")],
    ids=["cpu", "gpu"],
)
def test_the_estimate_after_three_later_fits_holds_for_the_rest_of_a_recorded_run(
    tmp_path: str, bundle: str, run: str
) -> None:
    """At step 6000 (the first fit at 5000, three later ones since: a few minutes into a
    run) the time left it projects for each later log interval, summed over those the run
    logged whole, is within 25 % of what the run's timers then recorded."""
    cfg, rows = _recorded(bundle, run, str(tmp_path))
    clock, grand = clock_at(cfg, rows, 6000)
    assert clock.ready(6000) and clock.work.later[0] == 3
    intervals = whole_intervals(rows, 6000)
    assert len(intervals) >= 2
    projected = sum(
        sum(clock.seconds_left(grand, r["step"] - 1000).values())
        - sum(clock.seconds_left(grand, r["step"]).values())
        for r in intervals
    )
    took = sum(r.get(f"time/{p}", 0.0) for r in intervals for p in TIMERS)
    assert abs(projected / took - 1) < 0.25, (projected, took)


class _Bar:
    """What the clock tells the progress bar (the ETA) and prints above it."""

    def __init__(self) -> None:
        self.eta_seconds: list[float] = []
        self.lines: list[str] = []

    def eta(self, seconds: float) -> None:
        self.eta_seconds.append(seconds)

    def write(self, text: str) -> None:
        self.lines.append(text)


class _Timer:
    grand = dict.fromkeys(RATES, 1.0)


def test_no_estimate_is_printed_at_the_last_step() -> None:
    """A run whose rates are first all known at its last step has nothing left to estimate:
    no "about 0.0 s" line (the bar's ETA is 0). One step earlier it prints one."""
    for at, printed in ((2000, 0), (1999, 1)):
        clock = RunClock(_cfg())
        clock.work.done.update({"env": 800.0, "sac": 100.0, "eval": 10.0, "checkpoint": 1.0})
        clock.work.model_phase(_fit(400, 40), rewarder=False)
        clock.work.model_phase(_fit(600, 20), rewarder=False)
        bar = _Bar()
        clock.tick(bar, _Timer(), at)  # type: ignore[arg-type]  # (a stand-in: tick reads .grand)
        assert len(bar.lines) == printed and bar.eta_seconds[-1] >= 0
        assert all("about 0.0 s" not in line for line in bar.lines)
