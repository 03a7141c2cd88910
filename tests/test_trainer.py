"""The training loop end to end in-process: run folder contents and bit-exact resume."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from mbrl.agents import build_agent
from mbrl.config import Config
from mbrl.envs import ENVS
from mbrl.runtime.checkpoint import CheckpointError, load
from mbrl.runtime.progress import Progress
from mbrl.runtime.report import SkippedUpdates
from mbrl.runtime.validate import schema_for, validate
from mbrl.trainer import Trainer


def tiny_config(env: str = "hopper", /, **overrides: object) -> Config:
    cfg = schema_for(None)  # (the defaults, the flow's own keys in its model node)
    cfg.env.name = env
    cfg.total_steps, cfg.device, cfg.threads = 400, "cpu", 1
    cfg.agent.hidden_sizes, cfg.agent.batch_size = [32, 32], 32
    cfg.algorithm.name, cfg.algorithm.init_steps, cfg.algorithm.updates_per_step = "sac", 100, 1
    cfg.eval.every, cfg.eval.episodes = 200, 2
    cfg.logger.every, cfg.logger.progress = 100, False
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value)
    return validate(cfg)


def _rows(run_dir: str) -> list[dict[str, Any]]:
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Wall-clock quantities differ between any two runs; everything else must not.
    skip = ("time", "collector/avg_envstep_per_sec")
    return [
        {k: v for k, v in r.items() if k not in skip and not k.startswith(("time/", "process/"))}
        for r in rows
    ]


def test_run_folder_layout(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    Trainer(tiny_config(), run).run()
    for rel in [
        "config.yaml",
        "metrics.jsonl",
        "ckpt/last.pt",
        "ckpt/ckpt_best.pt",
        "ckpt/iteration_200.pt",
        "ckpt/iteration_400.pt",
        "log/collector/collector.log",
        "log/evaluator/evaluator.log",
        "log/learner/learner.log",
        "log/buffer/buffer.log",
    ]:
        assert os.path.isfile(os.path.join(run, rel)), rel
    assert any(
        f.startswith("events.out.tfevents") for f in os.listdir(os.path.join(run, "log", "tb"))
    )
    rows = _rows(run)
    assert [r["step"] for r in rows if "eval/return_mean" in r] == [200, 400]
    keys = set().union(*rows)
    for key in [
        "eval/return_std",
        "collector/avg_envstep_per_sec",
        "learner/q_loss",
        "buffer/current_have",
        "buffer/staleness",
        "time/env",
        "time/sac",
    ]:
        assert key in keys, key
    state = load(os.path.join(run, "ckpt", "last.pt"), env_name="hopper")
    assert state["step"] == 400 and state["updates"] == 300
    assert state["buffers"]["real"]["size"] == 400


def test_resumed_run_equals_uninterrupted_run(tmp_path: str) -> None:
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    Trainer(tiny_config(), full).run()
    Trainer(tiny_config(total_steps=200), split).run()  # "killed" after its step-200 checkpoint
    # Scribble past the checkpoint, as a run killed later would have: resume must drop it.
    with open(os.path.join(split, "metrics.jsonl"), "a", encoding="utf-8") as f:
        f.write('{"step": 300, "eval/return_mean": 1e9}\n')
    Trainer(tiny_config(total_steps=400, resume=split), split).run()

    a = load(os.path.join(full, "ckpt", "last.pt"))
    b = load(os.path.join(split, "ckpt", "last.pt"))
    for net in ("actor", "critic", "critic_target"):
        for key, value in a["agent"][net].items():
            assert torch.equal(value, b["agent"][net][key]), f"{net}.{key}"
    for key, value in a["buffers"]["real"]["data"].items():
        assert torch.equal(value, b["buffers"]["real"]["data"][key]), key
    assert _comparable(_rows(full)) == _comparable(_rows(split))


def test_a_resumed_runs_bar_shows_its_last_evaluation(tmp_path: str) -> None:
    """The progress bar of a resumed run shows the checkpoint's last evaluation from its first
    redraw, not only after its own first evaluation."""
    run = os.path.join(tmp_path, "run")
    Trainer(tiny_config(total_steps=200), run).run()
    (last,) = [
        r["eval/return_mean"] for r in _rows(run) if r["step"] == 200 and "eval/return_mean" in r
    ]
    resumed = Trainer(tiny_config(total_steps=400, resume=run, **{"logger.progress": True}), run)
    resumed.begin(note="")
    try:
        assert resumed.progress.bar.postfix == f"eval_return={last:.1f}"
    finally:
        resumed.progress.close()


def test_max_minutes_stops_as_ctrl_c_does_and_resumes_exactly(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run out of its minutes stops after the current step with ckpt/last.pt, says why and
    how long each phase took per 1000 steps; resumed, it equals the uninterrupted run."""
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    Trainer(tiny_config(), full).run()
    capsys.readouterr()
    stopped = Trainer(tiny_config(max_minutes=1e-9), split)  # (over by the first step's end)
    stopped.run()
    err = capsys.readouterr().err
    assert stopped.stopped == "max_minutes=1e-09 reached"
    assert "max_minutes=1e-09 reached: stopping after the current step" in err
    assert "stopped (max_minutes=1e-09 reached) at step 1 after" in err
    # (the saved config keeps the limit: the printed resume says so)
    keeps = "the resume keeps max_minutes=1e-09 (the run's config): it stops again after as long"
    assert f"resume={split}\n  limit        {keeps}; max_minutes=null for no limit\n" in err
    assert "(each phase's seconds per 1000 env steps; " in err
    assert "  ran          SAC update eager\n" in err
    assert load(os.path.join(split, "ckpt", "last.pt"))["step"] == 1
    # (a resume with seeds.py's overrides: the process's own, named nowhere as a change)
    own = {"max_minutes": 60.0, "logger.progress": True}
    Trainer(tiny_config(resume=split, **own), split).run()
    assert "  changed " not in capsys.readouterr().err
    a, b = (load(os.path.join(run, "ckpt", "last.pt")) for run in (full, split))
    _assert_same(a["agent"], b["agent"], "agent")
    assert _comparable(_rows(full)) == _comparable(_rows(split))


def test_a_stop_between_log_lines_carries_its_time_into_the_resumed_runs_first_line(
    tmp_path: str,
) -> None:
    """Stopped at step 1 (no log line yet) after 2 s outside every phase: its checkpoint holds
    the open interval, and the resumed run's first log line adds it to its own time, so that
    no second of the stopped process is missing from the run's time/*."""
    import time

    from mbrl.runtime.timer import CARRIED

    run = os.path.join(tmp_path, "run")
    stopped = Trainer(tiny_config(max_minutes=1e-9), run)
    stopped.step_hook = lambda: time.sleep(2.0)
    stopped.run()
    saved = load(os.path.join(run, "ckpt", "last.pt"))["timer"]
    assert saved["wall"] >= 2.0 and saved["phases"]["env"] > 0, saved
    t0 = time.perf_counter()
    Trainer(tiny_config(resume=run), run).run()
    resumed = time.perf_counter() - t0  # (this process's whole time: its interval's bound)
    first, *later = [r for r in _rows(run) if "time/wall" in r]
    assert first["step"] == 100 and first[CARRIED] == pytest.approx(saved["wall"])
    assert not any(CARRIED in r for r in later)  # (the first line after the resume alone)
    assert first["time/other"] >= 2.0 and first["time/wall"] >= saved["wall"], first
    assert first["time/wall"] <= saved["wall"] + resumed, first  # (counted once)
    for phase, seconds in saved["phases"].items():
        assert first[f"time/{phase}"] >= seconds, (phase, first)
    phases = sum(v for k, v in first.items() if k.startswith("time/") and k != "time/wall")
    assert phases == pytest.approx(first["time/wall"])  # (other: the wall less the phases)


@pytest.mark.parametrize("snapshot", [100, 200, 300])
def test_resume_from_any_snapshot_equals_uninterrupted_run(tmp_path: str, snapshot: int) -> None:
    """A run killed after any checkpoint: ``iteration_<N>.pt`` copied over ``last.pt`` (the
    state a kill right after that checkpoint leaves) resumes to the uninterrupted run. The
    first checkpoint (step 100) is written before the first update."""
    import shutil

    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    keep = {"eval.every": 100, "checkpoint.buffer_in_snapshots": True}  # (snapshots that resume)
    Trainer(tiny_config(**keep), full).run()
    shutil.copytree(full, split)
    ckpt = os.path.join(split, "ckpt")
    shutil.copy(os.path.join(ckpt, f"iteration_{snapshot}.pt"), os.path.join(ckpt, "last.pt"))
    Trainer(tiny_config(**keep, resume=split), split).run()
    a, b = load(os.path.join(full, "ckpt", "last.pt")), load(os.path.join(ckpt, "last.pt"))
    _assert_same(a["agent"], b["agent"], "agent")
    assert _comparable(_rows(full)) == _comparable(_rows(split))


def test_a_slim_snapshot_is_refused_as_a_resume_point(tmp_path: str) -> None:
    """By default snapshots hold no buffers; one copied over last.pt is refused, by name."""
    import shutil

    run = os.path.join(tmp_path, "run")
    Trainer(tiny_config(**{"eval.every": 200}), run).run()
    ckpt = os.path.join(run, "ckpt")
    shutil.copy(os.path.join(ckpt, "iteration_200.pt"), os.path.join(ckpt, "last.pt"))
    with pytest.raises(CheckpointError, match="holds no buffers"):
        Trainer(tiny_config(resume=run), run)


def _assert_same(a: object, b: object, path: str) -> None:
    """Nested state dicts equal bit for bit."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for key in a:
            _assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), path
    else:
        assert a == b, path


def test_snapshots_hold_no_buffers_and_the_estimate_fits_the_files(tmp_path: str) -> None:
    """By default every iteration_<N>.pt holds the networks, optimizers and counters but not
    the buffers; last.pt and ckpt_best.pt hold everything (ckpt_best.pt can resume). The
    start block's estimate of the files is within 25 % of what the run leaves: the pool as
    the schedule leaves it (here 3 phases of 20 000 one-step rollouts), not its allocation
    (for 4-step rollouts and 10 phases kept: 800 000 rows)."""
    from mbrl.runtime.capacity import checkpoint_sizes, pool_rows

    run = os.path.join(tmp_path, "run")
    kw = {
        "algorithm.name": "mbpo",
        "model.max_epochs": 1,
        "mbpo.model_train_freq": 100,  # model phases at 100, 200, 300
        "rollout.batch_size": 20_000,
        "rollout.min_length": 1,
        "rollout.max_length": 4,  # (from MBPO's epoch 20 on: after this run)
    }
    cfg = tiny_config(total_steps=400, **kw)
    Trainer(cfg, run).run()
    ckpt = os.path.join(run, "ckpt")
    snap, last = load(os.path.join(ckpt, "iteration_400.pt")), load(os.path.join(ckpt, "last.pt"))
    assert "buffers" not in snap and "agent" in snap and "algorithm" in snap
    assert "buffers" in last and "buffers" in load(os.path.join(ckpt, "ckpt_best.pt"))
    assert last["buffers"]["model"]["size"] == pool_rows(cfg) == 60_000
    size = {n: os.path.getsize(os.path.join(ckpt, n)) for n in os.listdir(ckpt)}
    assert size["last.pt"] - size["iteration_400.pt"] > 60_000 * 100  # the pool's rows
    est = checkpoint_sizes(cfg, 11, 3)
    assert est.snapshots == 2  # evaluations at 200 and 400 (the last step)
    assert 0.75 < size["iteration_400.pt"] / est.snapshot < 1.25
    assert 0.75 < size["last.pt"] / est.full < 1.25
    assert sorted(size) == ["ckpt_best.pt", "iteration_200.pt", "iteration_400.pt", "last.pt"]
    assert 0.75 < sum(size.values()) / est.total < 1.25


def test_snapshots_before_the_first_update_are_estimated_without_optimizer_state(
    tmp_path: str,
) -> None:
    """Adam holds no moments before its first step: a snapshot during the random steps holds
    the weights alone, and the estimate counts it so (each file within 25 %, as above; the
    fixed allowance for counters and states is most of the error on networks this small)."""
    from mbrl.runtime.capacity import checkpoint_sizes

    run = os.path.join(tmp_path, "run")
    cfg = tiny_config("pendulum", **{"algorithm.init_steps": 250, "agent.hidden_sizes": [512, 512]})
    Trainer(cfg, run).run()
    size = {n: os.path.getsize(os.path.join(run, "ckpt", n)) for n in os.listdir(run + "/ckpt")}
    est = checkpoint_sizes(cfg, 3, 1)
    assert est.snapshots == 2 and est.early[0] == 1  # at 200 (random steps), at 400
    assert 0.75 < size["iteration_200.pt"] / est.early[1] < 1.25
    assert 0.75 < size["iteration_400.pt"] / est.snapshot < 1.25
    # the difference is Adam's two fp32 moments of the actor and the critic (not the target)
    agent = build_agent(3, 1, cfg.agent)
    moments = 8 * sum(p.numel() for m in (agent.actor, agent.critic) for p in m.parameters())
    assert 0.95 < (size["iteration_400.pt"] - size["iteration_200.pt"]) / moments < 1.05
    assert 0.75 < sum(size.values()) / est.total < 1.25


def test_a_run_that_never_updates_is_estimated_without_optimizer_state(tmp_path: str) -> None:
    """Random steps to the end (MBPO's model too never fits): every file holds the weights
    alone, and the start block's line says so without contradicting itself."""
    from mbrl.runtime.capacity import checkpoint_sizes

    run = os.path.join(tmp_path, "run")
    over = {"algorithm.name": "mbpo", "algorithm.init_steps": 400, "agent.hidden_sizes": [512, 512]}
    cfg = tiny_config("pendulum", **over)
    Trainer(cfg, run).run()
    size = {n: os.path.getsize(os.path.join(run, "ckpt", n)) for n in os.listdir(run + "/ckpt")}
    est = checkpoint_sizes(cfg, 3, 1)
    assert est.early == (2, est.early[1]) and est.snapshots == 2  # at 200 and 400: no update
    for name in ("last.pt", "iteration_400.pt"):
        assert 0.75 < size[name] / (est.full if name == "last.pt" else est.early[1]) < 1.25, name
    text = est.text()
    assert text.startswith("at most ~") and "2 snapshots of ~" in text, text
    assert text.endswith(", before any update") and "the first" not in text, text


def test_a_run_whose_checkpoints_cannot_fit_on_the_disk_is_refused(tmp_path: str) -> None:
    """10 million evaluations' snapshots: more than any disk here; refused before start."""
    from mbrl.config import ConfigError
    from mbrl.runtime.capacity import check_disk

    cfg = tiny_config("pendulum", total_steps=10_000_000, **{"eval.every": 1})
    with pytest.raises(ConfigError, match=r"checkpoints would take .* free: .*snapshots=false"):
        check_disk(cfg, 3, 1, os.path.join(tmp_path, "not", "yet", "made"))
    assert os.listdir(tmp_path) == []


def test_a_resumed_runs_checkpoints_so_far_count_as_room(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped by a full disk resumes once the space is back: the checkpoints it holds
    are part of its total, already on the disk (they are overwritten, not added to)."""
    import collections

    from mbrl.config import ConfigError
    from mbrl.runtime import capacity

    cfg = tiny_config("pendulum", total_steps=1000)
    total = capacity.checkpoint_sizes(cfg, 3, 1).total
    run = os.path.join(tmp_path, "run")
    os.makedirs(os.path.join(run, "ckpt"))
    with open(os.path.join(run, "ckpt", "last.pt"), "wb") as f:
        f.truncate(total // 2)  # (its size is what counts)
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(capacity.shutil, "disk_usage", lambda _: usage(0, 0, total - total // 2))
    capacity.check_disk(cfg, 3, 1, run)  # fits, counting what the run holds
    os.remove(os.path.join(run, "ckpt", "last.pt"))
    with pytest.raises(ConfigError, match="checkpoints would take"):
        capacity.check_disk(cfg, 3, 1, run)


@pytest.mark.parametrize("env", sorted(ENVS))
def test_every_env_trains(env: str, tmp_path: str) -> None:
    run = os.path.join(tmp_path, env)
    cfg = tiny_config(
        env,
        total_steps=60,
        **{
            "env.max_episode_steps": 30,
            "algorithm.init_steps": 30,
            "eval.every": 60,
            "eval.episodes": 1,
            "logger.every": 60,
        },
    )
    final = Trainer(cfg, run).run()
    assert math.isfinite(final)
    state = load(os.path.join(run, "ckpt", "last.pt"), env_name=env)
    assert state["updates"] == 30


@pytest.mark.cuda
@pytest.mark.parametrize(
    "amp,compile,ran",
    [
        ("off", "false", "eager"),
        ("bf16", "true", "compiled, graphed"),
        ("fp16", "true", "compiled"),
    ],
)
def test_cuda_run_and_resume(amp: str, compile: str, ran: str, tmp_path: str) -> None:
    """compile=true: graphed SAC blocks and fit steps (fp16: compiled, not graphed), as
    metrics.jsonl records."""
    run = os.path.join(tmp_path, "run")
    kw = {"device": "cuda", "amp": amp, "compile": compile}
    Trainer(tiny_config(total_steps=200, **kw), run).run()
    Trainer(tiny_config(total_steps=300, resume=run, **kw), run).run()
    state = load(os.path.join(run, "ckpt", "last.pt"))
    assert state["step"] == 300 and state["buffers"]["real"]["data"]["obs"].is_cpu
    assert [r for r in _rows(run) if "speed/sac_update" in r][-1]["speed/sac_update"] == ran


@pytest.mark.parametrize("flush", [True, False])
def test_trainer_applies_flush_denormal(flush: bool, tmp_path: str) -> None:
    """flush_denormal=true makes this thread's float math treat denormals as zero."""
    if not torch.set_flush_denormal(True):  # (the conftest fixture resets it)
        pytest.skip("this CPU has no denormal flushing")
    torch.set_flush_denormal(not flush)
    Trainer(tiny_config(flush_denormal=flush), os.path.join(tmp_path, "run"))
    tiny = torch.tensor([1e-40]) * 1.0  # denormal in fp32 (smallest normal: 1.2e-38)
    assert (float(tiny[0]) == 0.0) == flush


def test_the_compile_warm_up_is_a_phase_of_its_own(tmp_path: str) -> None:
    """Timed as ``time/compile`` (so a sweep's phase bars show it, not "other"), and in the
    summary; its seconds are the warm-ups the start block reports."""
    from mbrl.tools.plotting import load_run

    run = os.path.join(tmp_path, "run")
    trainer = Trainer(tiny_config("pendulum", compile="true", total_steps=200), run)
    trainer.run()
    first = _rows(run)[0]
    warm_up = sum(c.seconds or 0.0 for c in trainer.compiled.values())
    assert warm_up > 0 and first["time/compile"] >= warm_up
    assert first["time/other"] < 0.5 * first["time/compile"]
    assert load_run(run).phase_seconds()["compile"] == first["time/compile"]


def test_one_rank_says_the_run_will_stop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under torchrun Ctrl-C reaches every rank: each stops, rank 0 alone says so, and why:
    the reason of the rank that asked (Ctrl-C, or max_minutes reached there first)."""
    from mbrl.runtime.interrupt import StopRequest

    for world, rank, says in (("2", "1", False), ("2", "0", True), ("1", "3", True)):
        monkeypatch.setenv("WORLD_SIZE", world)  # (RANK alone, from another launcher: says)
        monkeypatch.setenv("RANK", rank)
        stop = StopRequest(lambda: "the current step", None)
        stop.request()
        assert stop.requested
        said = capsys.readouterr().err
        assert ("Ctrl-C: stopping after the current step" in said) == says, (world, rank)
    # Asked on another rank only: this one (rank 0 of a single process here) says why it stops.
    monkeypatch.setenv("WORLD_SIZE", "1")
    stop = StopRequest(lambda: "the current step", None)
    # The largest of the ranks' codes (a stand-in for the all-reduce over two ranks: this
    # one's code and another's): 1, Ctrl-C there; 2, max_minutes reached there first.
    for there, why in ((1, "a stop requested on another process of the run"),
                       (2, "max_minutes=30 reached")):  # fmt: skip
        stop = StopRequest(lambda: "the current step", 30)
        monkeypatch.setattr("mbrl.collectives.min_int", lambda v, t=there: min(v, -t))
        assert stop.agreed() and stop.why == why
        assert f"{why}: stopping after" in capsys.readouterr().err
    stop = StopRequest(lambda: "the current step", 30)
    monkeypatch.setattr("mbrl.collectives.min_int", lambda v: min(v, 0))  # (no stop there)
    assert not stop.agreed()
    stop.request()  # (Ctrl-C here: this rank's code, 1)
    assert stop.agreed() and stop.why == "Ctrl-C"


def test_skipped_updates_are_warned_of_once_and_a_whole_interval_of_them_once_more() -> None:
    """The counts each warning names are the differences of the logged totals; the summary
    line is the totals."""
    skips = SkippedUpdates()
    assert skips.seen(100, {}) == ""  # (no update yet: no learner metrics)
    first = skips.seen(200, {"learner/updates": 100, "learner/nonfinite_steps": 3})
    assert first.startswith("SAC skipped 3 of 100 updates between steps 100 and 200")
    assert skips.seen(300, {"learner/updates": 200, "learner/nonfinite_steps": 9}) == ""
    every = skips.seen(400, {"learner/updates": 300, "learner/nonfinite_steps": 109})
    assert every.startswith("SAC skipped all 100 of its updates between steps 300 and 400")
    assert skips.seen(500, {"learner/updates": 400, "learner/nonfinite_steps": 209}) == ""
    assert skips.line() == "209 of 400 SAC updates (a non-finite loss each)"
    batched = SkippedUpdates()
    batched.who = "seed 3 (runs/x_seed3): "
    said = batched.seen(100, {"learner/updates": 100, "learner/nonfinite_steps": 1})
    assert said.startswith("seed 3 (runs/x_seed3): SAC skipped 1 of 100 updates between steps 0")
    assert SkippedUpdates().line() == ""


def test_a_diverged_sac_is_named_in_train_log_and_the_summary(
    tmp_path: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """NaN in the critic's weights at step 250: every later update has a non-finite loss and
    is skipped. The run warns of the first skips (steps 251-300 of the interval to 300) and,
    once more, of the first interval with no update left (for train.log), and counts them in
    its summary; a resume counts on from the checkpoint's totals."""
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(tiny_config(), run)

    def poison() -> None:
        if trainer.env_steps == 250:
            with torch.no_grad():
                next(iter(trainer.algo.agent.critic.parameters())).fill_(float("nan"))

    trainer.step_hook = poison
    with caplog.at_level("WARNING", logger="mbrl.trainer"):
        trainer.run()
    warned = [r.getMessage() for r in caplog.records if r.name == "mbrl.trainer"]
    assert len(warned) == 2, warned
    assert warned[0].startswith("SAC skipped 50 of 100 updates between steps 200 and 300")
    assert warned[1].startswith("SAC skipped all 100 of its updates between steps 300 and 400")
    rows = [r for r in _rows(run) if "learner/nonfinite_steps" in r]
    assert rows[-1]["learner/nonfinite_steps"] == 150  # steps 251-400, one update each
    assert "skipped      150 of 300 SAC updates (a non-finite loss each)" in capsys.readouterr().err
    caplog.clear()  # resumed, it counts on from the checkpoint's totals, and says so anew
    with caplog.at_level("WARNING", logger="mbrl.trainer"):
        Trainer(tiny_config(total_steps=500, resume=run), run).run()
    warned = [r.getMessage() for r in caplog.records if r.name == "mbrl.trainer"]
    assert len(warned) == 1, warned
    assert warned[0].startswith("SAC skipped all 100 of its updates between steps 400 and 500")
    assert "skipped      250 of 400 SAC updates" in capsys.readouterr().err


def test_a_labelled_progress_prints_a_line_per_evaluation_and_no_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A parallel sweep's job: the label, the step, the return and the time left (none at the
    last step, where the estimate has nothing left to say)."""
    progress = Progress(400, 0, True, 100, label="job 1 (seed=1)")
    assert not progress.enabled
    progress.step(200)
    progress.eta(65.0)
    progress.eval_return(-123.45)
    progress.step(400)
    progress.eval_return(-99.0)
    progress.close()
    assert capsys.readouterr().err.splitlines() == [
        "job 1 (seed=1): step 200/400, eval return -123.5, about 1 min 05 s left",
        "job 1 (seed=1): step 400/400, eval return -99.0",
    ]


def test_a_resume_says_how_many_logged_lines_past_its_checkpoint_it_dropped(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed at step 300 (its folder copied then, as a kill -9 leaves it) has logged
    past its checkpoint at 200: the resume drops those lines, says how many and to which
    step, and logs those steps again."""
    import shutil

    run, killed = os.path.join(tmp_path, "run"), os.path.join(tmp_path, "killed")
    trainer = Trainer(tiny_config(), run)

    def copy_at_300() -> None:
        if trainer.env_steps == 300:
            shutil.copytree(run, killed)

    trainer.step_hook = copy_at_300
    trainer.run()
    past = [r for r in _rows(killed) if r["step"] > 200]
    assert past and max(r["step"] for r in past) == 300
    capsys.readouterr()
    resumed = Trainer(tiny_config(resume=killed), killed)
    assert resumed.speed.why == "off (auto: as the run chose before this resume)"
    longer = Trainer(tiny_config(resume=run, total_steps=10**6), run)  # (auto would compile)
    assert longer.speed.why == "off (auto: as the run chose before this resume)"
    longer.end()  # (its folder's lock)
    resumed.run()
    assert len(past) == 1  # (the log line at 300; the evaluations are at 200 and 400)
    said = "from step 200 (ckpt/last.pt); 1 metric line logged after it (to step 300) dropped"
    assert said + ": this run logs those steps again" in capsys.readouterr().err
    assert _comparable(_rows(killed)) == _comparable(_rows(run))


def test_a_new_run_in_a_folder_of_a_run_without_checkpoint_keeps_those_logs_apart(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run stopped before its first checkpoint (a full disk, a crash) leaves logs and no
    checkpoint; a new run there may start (nothing to resume) but neither appends to those
    logs nor drops them: they move to earlier_run_1/, which plot.py does not take for a run."""
    from mbrl.tools.plotting import find_runs

    run = os.path.join(tmp_path, "run")
    os.makedirs(os.path.join(run, "log", "learner"))
    old = '{"step": 100, "eval/return_mean": -5.0}\n'
    with open(os.path.join(run, "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.write(old)
    Trainer(tiny_config(total_steps=200), run).run()
    assert f"note: {run} held the logs of a run that saved no checkpoint" in capsys.readouterr().err
    with open(os.path.join(run, "earlier_run_1", "metrics.jsonl"), encoding="utf-8") as f:
        assert f.read() == old
    assert [r["step"] for r in _rows(run) if "eval/return_mean" in r] == [200]
    assert [r.path for r in find_runs([str(tmp_path)])] == [run]
