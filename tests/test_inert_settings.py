"""Settings that cannot act before a run ends are named at start-up, and a multirun whose swept
key acts in none of its jobs says so before they run. Each claim is checked here against the
schedule itself: MBPO's rollout-length formula evaluated at every model phase of the run."""

from __future__ import annotations

import os

from test_cli import TINY, _run
from test_fidelity import composed

from mbrl.config import Config
from mbrl.runtime.inert_settings import (
    campaign_warnings,
    given_warnings,
    inert_sweeps,
    swept_values,
    warnings_for,
)
from mbrl.schedule import rollout_length

GROUPS = ("env", "algorithm", "model", "algorithm_env")


def lengths_used(cfg: Config) -> list[int]:
    """MBPO's rollout length (mbpo.py's _set_rollout_length) at each model phase of the run."""
    r, out = cfg.rollout, []
    freq, init = cfg.mbpo.model_train_freq, cfg.algorithm.init_steps
    for step in range(freq, cfg.total_steps, freq):
        if step < init:
            continue
        epoch = (step - init) // cfg.mbpo.epoch_length
        if epoch <= r.min_epoch:
            out.append(r.min_length)
            continue
        dx = (
            1.0
            if r.max_epoch == r.min_epoch
            else (epoch - r.min_epoch) / (r.max_epoch - r.min_epoch)
        )
        out.append(int(min(dx, 1.0) * (r.max_length - r.min_length) + r.min_length))
    return out


def test_a_rollout_sweep_that_cannot_act_is_named() -> None:
    """Pendulum, 2000 steps: its schedule leaves min_length only from step 2000 on."""
    base = composed("env=pendulum", "total_steps=2000", "rollout.min_length=1")
    sweeps = swept_values(["rollout.max_length=1,10", "seed=0"], GROUPS)
    assert sweeps == {"rollout.max_length": [1, 10]}
    for value in (1, 10):
        job = composed(
            "env=pendulum",
            "total_steps=2000",
            "rollout.min_length=1",
            f"rollout.max_length={value}",
        )
        assert set(lengths_used(job)) == {1}
    (warning,) = inert_sweeps(base, sweeps)
    assert "the sweep over rollout.max_length (1, 10) changes nothing" in warning
    assert "would act from step 2000 at the earliest" in warning  # (its first job's: 1 == min)
    # The same sweep over a run long enough for the schedule: each value acts.
    longer = composed("env=pendulum", "total_steps=4000", "rollout.min_length=1")
    assert inert_sweeps(longer, sweeps) == []
    used = [
        lengths_used(
            composed(
                "env=pendulum",
                "total_steps=4000",
                "rollout.min_length=1",
                f"rollout.max_length={v}",
            )
        )
        for v in (1, 10)
    ]
    assert used[0] != used[1]


def test_one_run_names_each_setting_that_cannot_act() -> None:
    cfg = composed("env=pendulum", "total_steps=3000", "eval.every=5000", "rollout.max_length=9")
    (eval_warning,) = warnings_for(cfg)  # the schedule acts from step 2000
    assert eval_warning.startswith("warning: eval.every=5000 cannot act")
    assert "its first step would be 5000, and the run ends at total_steps=3000" in eval_warning
    late = composed("env=pendulum", "total_steps=3000", "mbpo.model_train_freq=4000")
    (model_warning,) = warnings_for(late)
    assert "the first model phase would be at step 4000" in model_warning
    assert warnings_for(composed("env=hopper")) == []  # MBPO's own settings all act
    assert warnings_for(composed("env=pendulum")) == []
    # A schedule with max_length == min_length means constant rollouts: not a warning ...
    same = composed("env=pendulum", "total_steps=2000", "rollout.max_length=5")
    assert warnings_for(same) == []
    # ... but a max_length that differs and is never reached is.
    (schedule,) = warnings_for(composed("env=pendulum", "total_steps=2000", "rollout.max_length=9"))
    assert "rollout.max_length cannot act" in schedule


def test_the_warning_names_the_step_at_which_the_schedule_moves() -> None:
    """Hopper at MBPO's settings: the step the warning names is the first env step at which
    ``rollout_length`` (scanned here step by step) exceeds 1; a run that ends before it is
    warned (30 000 steps included), one that reaches it is not."""
    hopper = composed("env=hopper")
    first = next(s for s in range(hopper.total_steps) if rollout_length(s, hopper) > 1)
    assert (rollout_length(first - 1, hopper), rollout_length(first, hopper)) == (1, 2)
    for total in (6000, 30_000, first):
        (warning,) = warnings_for(composed("env=hopper", f"total_steps={total}"))
        assert f"whose first length other than 1 is 2, at step {first};" in warning, warning
    assert warnings_for(composed("env=hopper", f"total_steps={first + 1}")) == []


def test_model_keys_given_to_a_sac_run_are_named() -> None:
    """algorithm=sac trains no model: a model-side key the command sets is named (once, with
    the others of its group), the agent's and the env's are not, and a SAC run that sets none
    starts without a warning about them; a sweep over one says it changes nothing."""
    sac = composed("env=pendulum", "algorithm=sac", "total_steps=3000")
    keys = ["env", "model", "mbpo.real_ratio", "rollout.max_length", "agent.lr", "seed"]
    (warning,) = given_warnings(sac, keys)
    assert warning.startswith("warning: model, mbpo.real_ratio, rollout.max_length cannot act")
    assert "algorithm=sac trains no model" in warning
    assert warnings_for(sac) == [] and given_warnings(sac, ["agent.lr", "env"]) == []
    mbpo = composed("env=pendulum", "total_steps=3000")
    assert given_warnings(mbpo, keys) == []  # (each acts in an MBPO run)
    sweeps = swept_values(["mbpo.real_ratio=0.1,0.5"], GROUPS)
    (sweep,) = inert_sweeps(sac, sweeps)
    assert "the sweep over mbpo.real_ratio (0.1, 0.5) changes nothing" in sweep


def test_sweeps_of_groups_or_intervals_are_not_checked() -> None:
    assert swept_values(["env=hopper,walker2d", "seed=0,1"], GROUPS) == {}
    assert swept_values(["model.lr=interval(0,1)"], GROUPS) == {}
    assert swept_values(["seed=range(0,3)"], GROUPS) == {"seed": [0, 1, 2]}


def test_a_multirun_warns_before_its_jobs(train_cmd: list[str], tmp_path: str) -> None:
    """TINY's 300 steps end long before Pendulum's rollout schedule moves (step 1100)."""
    cmd = [*train_cmd, "-m", *TINY, "rollout.min_length=1", "rollout.max_length=1,10"]
    proc = _run([*cmd, f"hydra.sweep.dir={os.path.join(tmp_path, 'sweep')}"], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep_warning = proc.stderr.index("the sweep over rollout.max_length (1, 10) changes nothing")
    assert sweep_warning < proc.stderr.index("FlowMBPO: MBPO")  # before the first job starts
    # Each job's own start block names it too (its max_length differs from min_length: 10).
    assert proc.stderr.count("warning: rollout.max_length cannot act in this run") == 1


def test_a_campaigns_warnings_name_the_variants_they_hold_for() -> None:
    """seeds.py's warnings: each said once; a warning that holds for some of the campaign's
    variants names them (a command running one variant of two names it too), one that holds
    for all does not."""
    from test_trainer import tiny_config

    late = tiny_config("pendulum", **{"algorithm.init_steps": 400, "eval.every": 500})
    early = tiny_config("pendulum", **{"algorithm.init_steps": 100, "eval.every": 500})
    both = campaign_warnings([("late", late), ("early", early)], 300, variants=2)
    lines = [w.line() for w in both]
    sac = "SAC (agent.*) cannot act in these runs: no SAC update: algorithm.init_steps=400"
    ends = "random steps fill the whole run (the run ends at total_steps=300)"
    assert [line for line in lines if "SAC" in line] == [f"warning (late): {sac} {ends}"]
    evals = [w for w in both if w.text.startswith("eval.every=500 cannot act in these runs")]
    assert len(evals) == 1 and evals[0].labels is None and evals[0].line().startswith("warning: ")
    assert [w.listed() for w in both if w.labels] == [f"in the runs of late: {sac} {ends}"]
    one = campaign_warnings([("early", early)], 300, variants=2)  # (this command's one variant)
    assert {w.labels for w in one} == {("early",)}
