"""profile=true's projection of a whole run and the training run's estimate of its time left
are one projection (mbrl.runtime.eta.time_left): on the same short Hopper config they project
the same work, because the window's two model fits are the run's first two (its first from
random weights, its second from the first), each to its early stop: later fits settling from
the second's epochs."""

from __future__ import annotations

import json
import os

from mbrl.config import Config
from mbrl.runtime.eta import TIMERS, FitEpochs, time_left
from mbrl.tools.profiling import run_profile, window_config
from mbrl.trainer import Trainer

from test_trainer import _rows, tiny_config

SHORT_HOPPER = {
    "algorithm.name": "mbpo",
    "algorithm.init_steps": 500,
    "mbpo.model_train_freq": 250,  # model phases at 500, 750, 1000
    "mbpo.real_data": "step",
    "algorithm.updates_per_step": 1,
    "rollout.batch_size": 500,
    "eval.every": 500,
    "eval.episodes": 1,
    "model.members": 3,
    "model.elites": 2,
    "model.flow.layers": 2,
    "model.flow.hidden": [32],
    "model.flow.embed_hidden": [32],
    "model.flow.embed_dim": 16,
    "profile.updates": 100,
    "profile.trace": False,
}
ONES = dict.fromkeys(TIMERS, 1.0)  # (rates of 1: time_left counts the work)


def _short(**overrides: object) -> Config:
    return tiny_config("hopper", total_steps=1250, **(SHORT_HOPPER | overrides))


def test_the_profile_and_the_training_estimate_project_the_same_run(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(_short(), run)
    first: dict[str, object] = {}

    def at_the_first_estimate() -> None:
        if trainer.clock.shown and not first:
            first["step"], first["epochs"] = trainer.env_steps, trainer.clock.work.epochs()
            first["done"] = dict(trainer.clock.work.done)

    trainer.step_hook = at_the_first_estimate
    trainer.run()
    fits = [r["model/epochs"] for r in _rows(run) if "model/epochs" in r]
    assert len(fits) == 3 and first["step"] == 751  # after the second fit and 100 updates
    assert first["epochs"] == FitEpochs(fits[0], fits[1])  # (the later fits' level: its own)
    step, done, epochs = first["step"], first["done"], first["epochs"]
    assert isinstance(step, int) and isinstance(done, dict) and isinstance(epochs, FitEpochs)
    estimate = {p: done[p] + w for p, w in time_left(trainer.cfg, step, ONES, epochs).items()}

    window = os.path.join(tmp_path, "profile")
    profiled = _short(**{"profile.enabled": True})
    seconds = run_profile(profiled, window)["projection"]
    with open(os.path.join(window, "log", "profile", "phases.json"), encoding="utf-8") as f:
        summary = json.load(f)
    assert summary["window"]["fit_epochs"] == fits[:2]  # the run's first two fits, exactly
    projected = time_left(profiled, 0, ONES, FitEpochs(fits[0], fits[1]))
    assert set(projected) == set(estimate) == set(seconds)
    for phase, work in projected.items():
        assert abs(work / estimate[phase] - 1) < 0.2, (phase, work, estimate[phase])


def test_the_window_records_from_its_second_model_fit() -> None:
    """Random steps, a fit to its early stop, the loop to the next model phase, then the
    recorded part: profile.updates updates after the second fit."""
    w = window_config(_short(**{"profile.updates": 100}))
    assert w.total_steps == 750 + 100 and w.eval.every == w.total_steps
    capped = window_config(_short(**{"profile.model_epochs": 3}))
    assert capped.model.max_epochs == 3 and window_config(_short()).model.max_epochs is None
    sac = window_config(_short(**{"algorithm.name": "sac"}))
    assert sac.total_steps == 500 + 100
