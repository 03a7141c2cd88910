"""Seeds batched in one process (mbrl.batched_seeds) against solo runs of the same seeds: the
reference is each seed's own MBPO object, stepped alone."""

from __future__ import annotations

import copy
import os
import shlex
import shutil

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from test_mbpo import _algo, _flat, mbpo_config
from test_resume_command import _parsed

from mbrl.batched_seeds import BatchedSeeds
from mbrl.config import ConfigError
from mbrl.mbpo import MBPO
from mbrl.seed_trainer import SeedTrainer, check_folders
from mbrl.trainer import Trainer

from test_trainer import _comparable, _rows

SEEDS = (0, 1, 2)
MBPO_TINY_RUN = {"total_steps": 300, "eval.every": 100, "checkpoint.snapshots": False}
# The batched updates' and model fits' matmuls round differently from a solo run's (vmap: one
# batched matmul for all seeds): after 320 updates and two model phases (3 epochs each) the
# largest difference in any weight, Adam moment, model parameter or buffer row was 1.8e-6
# (CPU, torch 2.13; 9.5e-7 with the fits run one seed after another).
TOL = 1e-5


def _diff(a: dict, b: dict) -> float:
    """The largest difference of two states' float tensors; all else must be equal."""
    flat_a, flat_b = _flat(a), _flat(b)
    assert flat_a.keys() == flat_b.keys()
    worst = 0.0
    for k, v in flat_a.items():
        w = flat_b[k]
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
            worst = max(worst, (v - w).abs().max().item())
        elif isinstance(v, torch.Tensor):
            assert torch.equal(v, w), k
        elif isinstance(v, np.ndarray):
            assert np.array_equal(v, w), k
        else:
            assert v == w, k
    return worst


# What a state holds of the algorithm (its env copies' pickled MuJoCo data hold wall-clock
# timers: two identical runs differ there)
PARTS = ("step", "updates", "agent", "algorithm", "buffers", "rng", "acting")


def _states_diff(batched: BatchedSeeds, solo: list[MBPO]) -> float:
    pairs = zip(batched.state_dicts(), solo, strict=True)
    return max(_diff(*({k: s[k] for k in PARTS} for s in (a, b.state_dict()))) for a, b in pairs)


def test_batched_seeds_are_their_solo_runs() -> None:
    """Seeds 0-2 of a tiny MBPO on Hopper batched, against each seed run alone: the same
    state bit for bit up to the first update (step 100); after 260 steps (model phases at
    100 and 200, 320 updates) the same within rounding. A batch resumed from its seeds'
    states goes on exactly as the batch does."""
    cfgs = [mbpo_config(total_steps=300, seed=s) for s in SEEDS]
    batched, solo = BatchedSeeds([_algo(c) for c in cfgs]), [_algo(c) for c in cfgs]
    for steps, tol in ((100, 0.0), (260, TOL)):
        while batched.env_steps < steps:
            last = batched.step()
            for algo in solo:
                want = algo.step()
        assert _states_diff(batched, solo) <= tol, steps
    assert all(step.updates == 2 and step.sac is not None for step in last)
    assert want.sac is not None and last[-1].sac is not None
    for k, v in want.sac.items():  # the last seed's last update's metrics
        torch.testing.assert_close(last[-1].sac[k], v, atol=TOL, rtol=TOL, msg=k)
    resumed = BatchedSeeds([_algo(c) for c in cfgs])
    resumed.load_state_dicts(copy.deepcopy(batched.state_dicts()))
    for runs in (batched, resumed):
        while runs.env_steps < 280:
            runs.step()
    # (a loaded ring buffer is stored compacted: its rows are compared, not its layout)
    keep = [p for p in PARTS if p != "buffers"]
    for a, b in zip(resumed.state_dicts(), batched.state_dicts(), strict=True):
        assert _diff({k: a[k] for k in keep}, {k: b[k] for k in keep}) == 0.0
    for resumed_run, batched_run in zip(resumed.runs, batched.runs, strict=True):
        rows = [
            {k: buf.rows() for k, buf in run.buffers().items()}
            for run in (resumed_run, batched_run)
        ]
        assert _diff(*rows) == 0.0
    for algo in [*solo, *batched.runs, *resumed.runs]:
        algo.close()


def test_seeds_that_differ_in_more_than_the_seed_are_refused() -> None:
    one, other = _algo(mbpo_config(seed=0)), _algo(mbpo_config(seed=1, **{"agent.gamma": 0.9}))
    with pytest.raises(ValueError, match="in more than the seed"):
        BatchedSeeds([one, other])
    with pytest.raises(ValueError, match=r"seeds must differ: seeds \[0, 0\]"):
        BatchedSeeds([one, _algo(mbpo_config(seed=0))])


def _close_rows(got: list[dict], want: list[dict], tol: float = 1e-4) -> None:
    """Two runs' logged rows: the same keys and steps, numbers within ``tol`` (relative and
    absolute), wall-clock figures apart."""
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for k, v in b.items():
            if "seconds" in k:  # (wall-clock)
                continue
            if isinstance(v, float):
                assert a[k] == pytest.approx(v, rel=tol, abs=tol), (a["step"], k)
            else:
                assert a[k] == v, (a["step"], k)


def test_batch_seeds_writes_each_seeds_run_folder_as_its_solo_run(tmp_path: str) -> None:
    """batch_seeds=2: seed 0 in the run folder, seed 1 in <folder>_seed1, each folder's
    metrics (losses, evaluations, buffers) those of the seed run alone; a batch stopped by
    max_minutes (as by Ctrl-C) and resumed equals the uninterrupted batch exactly, and a
    seed's folder resumes alone (a solo run) as well."""
    cfg = {**MBPO_TINY_RUN, "batch_seeds": 2}
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    returns = SeedTrainer(mbpo_config(**cfg), full).run()
    assert len(returns) == 2
    for seed, folder in enumerate((full, f"{full}_seed1")):
        solo = os.path.join(tmp_path, f"solo{seed}")
        Trainer(mbpo_config(**{**MBPO_TINY_RUN, "seed": seed}), solo).run()
        _close_rows(_comparable(_rows(folder)), _comparable(_rows(solo)))
        saved = OmegaConf.load(os.path.join(folder, "config.yaml"))
        assert saved.seed == seed and saved.batch_seeds == 1  # (an ordinary run's config)
    # Every seed logs the process's phase times of each interval (the same figures).
    times = [[{k: v for k, v in r.items() if k.startswith("time/")} for r in _rows(folder)]
             for folder in (full, f"{full}_seed1")]  # fmt: skip
    assert times[0] == times[1] and sum("time/sac" in t for t in times[0]) >= 2
    stopped = SeedTrainer(mbpo_config(**{**cfg, "max_minutes": 1e-9}), split)
    stopped.run()  # (over its minutes by the end of the first step)
    assert stopped.stopped == "max_minutes=1e-09 reached"
    resumed = SeedTrainer(mbpo_config(**{**cfg, "resume": split}), split)
    assert [t.env_steps for t in resumed.trainers] == [1, 1]
    resumed.run()
    for a, b in ((full, split), (f"{full}_seed1", f"{split}_seed1")):
        _close_rows(_comparable(_rows(b)), _comparable(_rows(a)), tol=0.0)
    alone = os.path.join(tmp_path, "alone")
    shutil.copytree(f"{full}_seed1", alone)
    more = {**MBPO_TINY_RUN, "total_steps": 350, "resume": alone}
    Trainer(mbpo_config(**more), alone).run()
    assert _rows(alone)[-1]["step"] == 350


def test_a_stopped_batch_prints_the_command_that_resumes_all_its_folders(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch with folders of its own (``batch_dirs``, as seeds.py gives them): its "resume
    all" line names them, and that line's overrides resume every seed."""
    lead, other = os.path.join(tmp_path, "lead"), os.path.join(tmp_path, "a, b=1")
    cfg = {**MBPO_TINY_RUN, "batch_seeds": 2, "batch_dirs": [other]}
    SeedTrainer(mbpo_config(**{**cfg, "max_minutes": 1e-9}), lead).run()
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "resume all" in x]
    assert err.count("  limit        the resume keeps max_minutes=1e-09 (the run's config)") == 1
    argv = shlex.split(line.split("resume all", 1)[1])
    parsed = dict(_parsed(a) for a in argv[2:])
    assert parsed == {"resume": lead, "batch_seeds": 2, "batch_dirs": [other]}
    resumed = SeedTrainer(mbpo_config(**{**MBPO_TINY_RUN, **parsed}), lead)
    assert [t.run_dir for t in resumed.trainers] == [lead, other]
    assert [t.env_steps for t in resumed.trainers] == [1, 1]
    for t in resumed.trainers:
        t.end()  # (releases the folders' locks)


def test_bad_batches_are_refused_before_anything_is_written(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    with pytest.raises(ConfigError, match="batch_dirs has 1 folders; with batch_seeds=3 give 2"):
        mbpo_config(batch_seeds=3, batch_dirs=["x"])
    os.makedirs(f"{run}_seed1")
    with open(os.path.join(f"{run}_seed1", "metrics.jsonl"), "w", encoding="utf-8") as f:
        f.write("{}\n")
    with pytest.raises(ConfigError, match="_seed1 exists and is not empty"):
        check_folders(mbpo_config(batch_seeds=2), run)


def test_memory_and_disk_checks_count_every_seed_of_a_batch(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What fits one seed (buffers in memory, checkpoints on disk) but not two: batch_seeds=2
    is refused before start, naming the seeds; one seed alone goes on."""
    import collections

    import mbrl.runtime.capacity as capacity

    one, two = mbpo_config(), mbpo_config(batch_seeds=2)
    need = sum(capacity.buffer_bytes(one, 11, 3))
    monkeypatch.setattr(capacity, "free_bytes", lambda device: 1.5 * need / capacity.HEADROOM)
    capacity.check_memory(one, 11, 3, torch.device("cpu"))
    with pytest.raises(ConfigError, match="for batch_seeds=2 seeds"):
        capacity.check_memory(two, 11, 3, torch.device("cpu"))
    total = capacity.checkpoint_sizes(one, 11, 3).total
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(capacity.shutil, "disk_usage", lambda where: usage(0, 0, 1.5 * total))
    capacity.check_disk(one, 11, 3, str(tmp_path))
    with pytest.raises(ConfigError, match="for each of batch_seeds=2 seeds"):
        capacity.check_disk(two, 11, 3, str(tmp_path))
    # Resumed, each seed's checkpoints so far count as room (they are overwritten): the
    # second seed's folder holds what the first half of the disk lacks.
    lead, other = os.path.join(tmp_path, "lead"), os.path.join(tmp_path, "other")
    for folder in (lead, other):
        os.makedirs(os.path.join(folder, "ckpt"))
    with open(os.path.join(other, "ckpt", "last.pt"), "wb") as f:
        f.truncate(int(0.6 * total))  # (a sparse file: its size without the bytes)
    with pytest.raises(ConfigError, match="for each of batch_seeds=2 seeds"):
        capacity.check_disk(two, 11, 3, lead)  # (the lead's folder alone: as before)
    capacity.check_disk(two, 11, 3, lead, [lead, other])


def test_each_seed_of_a_batch_says_what_its_resume_dropped_and_what_it_skipped(
    tmp_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seed 1's folder holds a metric line past its checkpoint (as a kill -9 leaves it): the
    batch's start block says so beside that seed's folder. NaN in seed 1's critic and its
    actor's head at step 250: its closing line counts its skipped updates and its env steps
    that acted with zeros; seed 0 had neither and says nothing."""
    run = os.path.join(tmp_path, "run")
    cfg = {**MBPO_TINY_RUN, "batch_seeds": 2}
    SeedTrainer(mbpo_config(**{**cfg, "max_minutes": 1e-9}), run).run()  # (stops at step 1)
    with open(f"{run}_seed1/metrics.jsonl", "a", encoding="utf-8") as f:
        f.write('{"step": 2, "train/episode_return": 0.0}\n')
    capsys.readouterr()
    batch = SeedTrainer(mbpo_config(**{**cfg, "resume": run}), run)
    critic = [k for k in batch.seeds.agents.online if k.startswith("critic")]
    actor_head = [k for k in batch.seeds.agents.online if k.startswith("actor.")][-1]

    def poison() -> None:
        if batch.seeds.env_steps == 250:
            with torch.no_grad():
                batch.seeds.agents.online[critic[0]][1].fill_(float("nan"))
                batch.seeds.agents.online[actor_head][1].fill_(float("nan"))

    batch.trainers[1].step_hook = poison
    batch.run()
    said = capsys.readouterr().err
    dropped = "1 metric line logged after it (to step 2) dropped: this run logs those steps again"
    assert f"seed 1: {run}_seed1; {dropped}" in said
    (closing,) = [line for line in said.splitlines() if line.startswith("  seed 1: eval return")]
    algo = batch.lead.cfg.algorithm  # (steps 251-300 skipped, of those past the random ones)
    skipped, updates = 50 * algo.updates_per_step, (300 - algo.init_steps) * algo.updates_per_step
    assert f"; skipped {skipped} of {updates} SAC updates (a non-finite" in closing, closing
    assert "skipped" not in said.split("resume all")[0].split("finished")[-1], said
    assert "; 50 env steps acted with zeros (the policy's action was not finite)" in closing
    logged = [r for r in _rows(f"{run}_seed1") if "collector/nonfinite_actions" in r]
    assert logged[-1]["collector/nonfinite_actions"] == 50  # (steps 251-300)
    assert "acted with zeros" not in said.split("resume all")[0].split("finished")[-1], said
