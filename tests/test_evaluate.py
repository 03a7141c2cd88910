"""scripts/evaluate.py: returns from a checkpoint, video, and clear errors for bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import Tensor

from mbrl.agents import SAC, SACConfig
from mbrl.envs import make_env
from mbrl.evaluator import DeterministicPolicy, Evaluator, episode_metrics, sequential_episodes
from mbrl.tools.eval_checkpoint import (
    EvaluateError,
    build_actor,
    check_video_path,
    evaluate,
    load_run,
    record_video,
)
from mbrl.trainer import Trainer

from test_trainer import _rows, tiny_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def evaluate_sequential(
    env_name: str,
    episodes: int,
    seed: int,
    policy: DeterministicPolicy,
    device: torch.device,
    max_episode_steps: int | None = None,
) -> dict[str, float]:
    """The reference for :class:`Evaluator`: the same episodes, one after another, with
    batch-1 policy calls; returns the same ``eval/*`` scalars."""
    env = make_env(env_name, max_episode_steps)
    try:
        returns, lengths = sequential_episodes(env, episodes, seed, policy, device)
    finally:
        env.close()
    return episode_metrics(returns, lengths)


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


def test_as_training_evaluates_trainings_episodes(finished_run: str) -> None:
    """--as-training gives exactly the return the run logged at the checkpoint's step, and
    says which episodes it ran; the default episodes are other ones, and it says so too."""
    logged = {
        r["step"]: r["eval/return_mean"] for r in _rows(finished_run) if "eval/return_mean" in r
    }
    for ckpt in ("200", "400", "best"):
        r = evaluate(finished_run, ckpt, None, None)
        assert (r["seed"], r["episodes"]) == (10_000, 2)  # tiny_config: seed 0, 2 episodes
        assert r["eval/return_mean"] == logged[int(r["step"])], ckpt
    script = [sys.executable, os.path.join(ROOT, "scripts", "evaluate.py"), finished_run]
    out = subprocess.run([*script, "--as-training"], capture_output=True, text=True, timeout=120)
    best = evaluate(finished_run, "best", None, None)["eval/return_mean"]
    assert out.returncode == 0 and f"return {best:.1f} ± " in out.stdout, out.stderr
    assert "over 2 episodes (env seeds 10000..10001: training's evaluation episodes" in out.stdout
    step = int(evaluate(finished_run, "best", None, None)["step"])
    assert f"the run logged {logged[step]:.1f} at step {step}: the same" in out.stdout
    out = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert "over 10 episodes (env seeds 123..132: --seed" in out.stdout
    out = subprocess.run([*script, "--as-training", "--seed", "5"], capture_output=True, text=True)
    assert out.returncode == 2 and "leave out --seed and --episodes" in out.stderr
    out = subprocess.run([*script, "--seed", "-1"], capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stderr) == (
        2,
        "error: --seed -1: env seeds are 0 or more (e.g. 123)\n",
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU run read where torch sees no GPU")
def test_a_gpu_run_is_evaluated_and_probed_on_a_cpu(finished_run: str, tmp_path: str) -> None:
    """A run trained with device=cuda (its config.yaml says so) is read here on the CPU: the
    same returns as the run itself gives, and probe.py reads it too."""
    gpu_run = os.path.join(tmp_path, "gpu_run")
    shutil.copytree(finished_run, gpu_run)
    path = os.path.join(gpu_run, "config.yaml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "\ndevice: cpu\n" in text
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("\ndevice: cpu\n", "\ndevice: cuda\n"))
    assert evaluate(gpu_run, "last", 2, 5) == evaluate(finished_run, "last", 2, 5)
    probe = [sys.executable, os.path.join(ROOT, "scripts", "probe.py"), gpu_run, "--episodes", "1"]
    out = _run(probe)
    assert out.returncode == 0, out.stderr


def test_sampled_actions_are_the_policys_draws_from_the_seed(finished_run: str) -> None:
    """--sample: the episode equals one run by hand with actions drawn from the actor by a
    generator seeded with the env seed; it differs from the deterministic episode."""
    cfg, state = load_run(finished_run, "last")
    agent = build_actor(cfg, state, torch.device("cpu"))
    gen = torch.Generator().manual_seed(7)
    env = make_env(cfg.env.name, cfg.env.max_episode_steps)
    try:
        returns, _ = sequential_episodes(
            env, 1, 7, lambda obs: agent.act(obs, False, gen), torch.device("cpu")
        )
    finally:
        env.close()
    sampled = evaluate(finished_run, "last", 1, 7, sample=True)
    assert sampled["eval/return_mean"] == pytest.approx(returns[0], rel=1e-6)
    assert sampled["eval/return_mean"] != evaluate(finished_run, "last", 1, 7)["eval/return_mean"]
    script = [sys.executable, os.path.join(ROOT, "scripts", "evaluate.py"), finished_run]
    out = _run([*script, "--sample", "--episodes", "1", "--seed", "7"])
    assert out.returncode == 0 and "over 1 episode with sampled actions" in out.stdout, out.stderr


def test_bad_runs_and_checkpoints_fail_clearly(finished_run: str, tmp_path: str) -> None:
    with pytest.raises(EvaluateError, match="not a FlowMBPO run folder"):
        evaluate(str(tmp_path), "last", 1, 0)
    missing = os.path.join(tmp_path, "nope")
    with pytest.raises(EvaluateError, match=f"^{re.escape(repr(missing))} does not exist$"):
        evaluate(missing, "last", 1, 0)
    # a checkpoint file for its run folder; a folder of runs (a campaign's) for one of them
    last = os.path.join(finished_run, "ckpt", "last.pt")
    said = f"is a file; give its run folder and the checkpoint: {finished_run} --ckpt last"
    with pytest.raises(EvaluateError, match=re.escape(said)):
        evaluate(last, "last", 1, 0)
    config = os.path.join(finished_run, "config.yaml")  # (a file, but no checkpoint)
    with pytest.raises(EvaluateError, match="is a file, not a run folder: give the folder"):
        evaluate(config, "last", 1, 0)
    with pytest.raises(EvaluateError, match=r"--ckpt 'iteration_x\.pt' is not allowed"):
        evaluate(finished_run, "iteration_x.pt", 1, 0)
    parent = os.path.dirname(finished_run)
    with pytest.raises(EvaluateError, match=r"holds runs but is not one: give a run folder"):
        evaluate(parent, "last", 1, 0)
    # a checkpoint named as its file is
    assert evaluate(finished_run, "last.pt", 1, 0) == evaluate(finished_run, "last", 1, 0)
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
    nowhere = os.path.join(tmp_path, "no_such_folder", "x.gif")
    with pytest.raises(EvaluateError, match=r"the folder .*no_such_folder does not exist"):
        check_video_path(nowhere)  # (evaluate.py: before the episodes run)
    path = os.path.join(tmp_path, "episode.gif")
    check_video_path(path)
    try:
        frames = record_video(finished_run, "last", path, seed=0)
    except EvaluateError as err:  # no GL backend or no pygame on this machine
        assert "cannot render" in str(err) and "video" in str(err)
        return
    assert frames == 201  # Pendulum: reset frame + 200 steps
    from PIL import Image
    from PIL.GifImagePlugin import GifImageFile

    # GIF writers merge identical consecutive frames into one longer frame: count by duration.
    with Image.open(path) as gif:
        assert isinstance(gif, GifImageFile)
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
    assert 1 < len(durations) <= frames
    unit = min(durations)  # one frame's duration, in the GIF's 10 ms steps
    assert sum(durations) == frames * unit


CPU = torch.device("cpu")


def _softsign(y: Tensor) -> Tensor:
    return y / (1 + y.abs())


# Deterministic policies whose every row is computed alone, from elementwise ops IEEE rounds
# exactly (no matmul, no transcendental kernel), so batching cannot change a bit. On Hopper: a
# damped joint controller with a forward lean; from seeds 0..3 two episodes fall (after 129
# and 122 steps) and two are truncated at 200.
ROW_WISE: dict[str, DeterministicPolicy] = {
    "hopper": lambda obs: _softsign(0.08 - (obs[:, 2:5] + 0.1 * obs[:, 8:11])),
    "pendulum": lambda obs: _softsign(0.3 * obs[:, :1] - 0.1),
}


def _sequential(
    env: str, episodes: int, seed: int, policy: DeterministicPolicy, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    single = make_env(env, steps)
    try:
        return sequential_episodes(single, episodes, seed, policy, CPU)
    finally:
        single.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env", ["hopper", "pendulum"])
def test_vector_evaluation_equals_the_sequential_one_exactly(env: str, mode: str) -> None:
    policy = ROW_WISE[env]
    returns, lengths = _sequential(env, 4, 0, policy, 200)
    if env == "hopper":  # episodes end at different steps, some by falling
        assert len(set(lengths.tolist())) > 1 and lengths.min() < 200
    evaluator = Evaluator(env, 4, 0, CPU, 200, vector=mode)
    try:
        metrics = evaluator.run(policy)
        assert np.array_equal(evaluator.last_returns, returns)
        assert np.array_equal(evaluator.last_lengths, lengths)
        assert metrics == evaluate_sequential(env, 4, 0, policy, CPU, 200)
    finally:
        evaluator.close()


def _greedy_sac(obs_dim: int, act_dim: int) -> DeterministicPolicy:
    torch.manual_seed(0)
    sac = SAC(obs_dim, act_dim, SACConfig(hidden_sizes=[64, 64]))
    return lambda obs: sac.act(obs, deterministic=True, generator=None)


def test_vector_evaluation_of_a_sac_actor_matches_the_sequential_one() -> None:
    policy = _greedy_sac(3, 1)
    returns, lengths = _sequential("pendulum", 3, 5, policy, 200)
    evaluator = Evaluator("pendulum", 3, 5, CPU, 200, vector="sync")
    try:
        evaluator.run(policy)
    finally:
        evaluator.close()
    # Batch-3 and batch-1 matmuls may round differently in the last bits.
    np.testing.assert_allclose(evaluator.last_returns, returns, rtol=1e-5)
    assert np.array_equal(evaluator.last_lengths, lengths)


def test_evaluations_in_a_row_start_from_the_same_seeds() -> None:
    policy = _greedy_sac(11, 3)
    evaluator = Evaluator("hopper", 3, 7, CPU, 200)
    try:
        first, first_returns = evaluator.run(policy), evaluator.last_returns
        assert evaluator.run(policy) == first
        assert np.array_equal(evaluator.last_returns, first_returns)
    finally:
        evaluator.close()


def test_train_py_evaluates_in_forkserver_workers(train_cmd: list[str], tmp_path: str) -> None:
    """eval.vector=async with 3 episodes: the evaluation runs in forkserver worker processes
    started by scripts/train.py (the path eval.episodes=10 takes on a machine with 10 cores
    or more, which auto never picks on 2 cores); its returns equal those of the checkpoint's
    actor run episode after episode from the same seeds."""
    run = os.path.join(tmp_path, "run")
    overrides = [
        *("env=pendulum", "algorithm=sac", "total_steps=200", "algorithm.init_steps=100"),
        *("eval.every=200", "eval.episodes=3", "eval.vector=async", "device=cpu"),
        *("agent.hidden_sizes=[32,32]", "logger.progress=false", f"hydra.run.dir={run}"),
    ]
    proc = subprocess.run([*train_cmd, *overrides], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
        evals = [r for r in map(json.loads, f) if "eval/return_mean" in r]
    assert [r["step"] for r in evals] == [200]
    cfg, state = load_run(run, "last")
    assert cfg.eval.vector == "async" and state["step"] == 200
    agent = build_actor(cfg, state, CPU)
    greedy = lambda obs: agent.act(obs, deterministic=True, generator=None)  # noqa: E731
    want = evaluate_sequential("pendulum", 3, cfg.seed + 10_000, greedy, CPU)
    # (Batch-3 and batch-1 matmuls may round differently in the last bits.)
    for key, value in want.items():
        assert evals[0][key] == pytest.approx(value, rel=1e-5), key
