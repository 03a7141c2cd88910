"""One run on two processes (torchrun's environment, gloo on a CPU): equal weights on every
rank, one run folder written by rank 0, resume with the same world size, bad input."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp
from test_cli import TINY, run_started
from test_mbpo import mbpo_config

from mbrl.runtime.checkpoint import load
from mbrl.trainer import Trainer

from test_trainer import _comparable, _rows

# MBPO with the rewarder: the model fit, its normalizers, early stopping, the rewarder's
# calibration and SAC all have to agree across ranks.
DDP_TINY = {
    "total_steps": 300,
    "rewarder.mode": "penalty",
    "rewarder.steps": 3,
    "rewarder.batch_size": 32,
    "rewarder.flow.layers": 1,
    "rewarder.flow.hidden": [8],
    "model.batch_size": 32,
    "mbpo.real_data": "step",  # (every row counted at once: the row counts below are exact)
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(rank: int, world: int, port: int, run_dir: str, out_dir: str) -> None:
    """One rank, with the environment torchrun gives its workers."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
    )
    torch.set_num_threads(1)
    trainer = Trainer(mbpo_config(**DDP_TINY), run_dir)
    trainer.run()
    algo = trainer.algo
    weights = {"agent": algo.agent.state_dict(), "algorithm": algo.model_side.state_dict()}
    weights["real"] = trainer.algo.buffer.rows()
    torch.save(weights, os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


def _floats(obj: object, path: str = "") -> dict[str, torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return {path: obj} if obj.is_floating_point() else {}
    out: dict[str, torch.Tensor] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_floats(v, f"{path}.{k}"))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            out.update(_floats(v, f"{path}[{i}]"))
    return out


def test_two_ranks_keep_equal_weights_and_one_run_folder(tmp_path: str) -> None:
    run, out = os.path.join(tmp_path, "run"), str(tmp_path)
    mp.start_processes(_rank_main, (2, _free_port(), run, out), nprocs=2, start_method="spawn")
    r0, r1 = (torch.load(os.path.join(out, f"rank{r}.pt")) for r in (0, 1))
    w0, w1 = (
        _floats({k: r0[k] for k in ("agent", "algorithm")}),
        _floats({k: r1[k] for k in ("agent", "algorithm")}),
    )
    assert w0.keys() == w1.keys() and len(w0) > 50
    for key in w0:  # networks, optimizer moments, the model's normalizers, the rewarder
        assert torch.equal(w0[key], w1[key]), key
    # ... trained on different data: each rank stepped its own envs.
    assert not torch.equal(r0["real"]["obs"], r1["real"]["obs"])
    assert r0["real"]["obs"].shape[0] == r1["real"]["obs"].shape[0] == 150
    state = load(os.path.join(run, "ckpt", "last.pt"))
    assert state["world_size"] == 2 and len(state["ranks"]) == 1
    assert state["step"] == 300 and state["buffers"]["real"]["size"] == 150
    assert torch.equal(state["ranks"][0]["buffers"]["real"]["data"]["obs"], r1["real"]["obs"])
    rows = _rows(run)  # rank 0 logs for the run: global steps, episodes of both ranks
    assert [r["step"] for r in rows if "eval/return_mean" in r] == [200, 300]
    assert any("model/holdout_nll" in r for r in rows)
    assert max(r.get("collector/envstep_count", 0) for r in rows) == 300


def _torchrun(args: list[str], cwd: str, nproc: int = 2) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    cmd += ["--master_port", str(_free_port()), *args]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    return run_started(cmd, cwd=cwd, timeout=300, env=env)


SAC_TINY = [a for a in TINY if not a.startswith(("mbpo.", "rollout.", "model."))]
SAC_TINY += ["algorithm=sac", "eval.every=100", "logger.progress=false", "logger.tensorboard=false"]


def test_torchrun_resume_equals_uninterrupted_and_refuses_other_world_sizes(
    train_cmd: list[str], tmp_path: str
) -> None:
    script = train_cmd[-1]
    full, split = os.path.join(tmp_path, "full"), os.path.join(tmp_path, "split")
    assert _torchrun([script, *SAC_TINY, f"hydra.run.dir={full}"], str(tmp_path)).returncode == 0
    short = [script, *SAC_TINY, "total_steps=200", f"hydra.run.dir={split}"]
    done = _torchrun(short, str(tmp_path))
    assert done.returncode == 0
    said = f"torchrun --nproc_per_node=2 {script} resume={split} total_steps=<more than 200>"
    assert said in done.stdout + done.stderr  # (the summary's command starts both ranks)
    assert sorted(os.listdir(tmp_path)) == ["full", "split"]  # no folder of rank 1's own
    before = sorted(os.listdir(split)), os.path.getsize(os.path.join(split, "metrics.jsonl"))
    # Another world size: one message, nothing written.
    for nproc, how in ((1, "with torchrun --nproc_per_node=2"),):
        res = _torchrun([script, f"resume={split}", "total_steps=300"], str(tmp_path), nproc)
        assert res.returncode != 0 and how in res.stderr, res.stderr[-2000:]
        assert res.stderr.count("error: resume=") == 1
    plain = run_started(
        [*train_cmd, f"resume={split}", "total_steps=300"],
        cwd=str(tmp_path), timeout=300,
    )  # fmt: skip
    assert plain.returncode == 2 and "resume it with torchrun --nproc_per_node=2" in plain.stderr
    assert (sorted(os.listdir(split)), os.path.getsize(os.path.join(split, "metrics.jsonl"))) == (
        before
    )
    res = _torchrun([script, f"resume={split}", "total_steps=300"], str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    assert _comparable(_rows(full)) == _comparable(_rows(split))
    a, b = load(os.path.join(full, "ckpt", "last.pt")), load(os.path.join(split, "ckpt", "last.pt"))
    for key, value in _floats(a["agent"]).items():
        assert torch.equal(value, _floats(b["agent"])[key]), key


def test_world_size_must_divide_the_batch_sizes(train_cmd: list[str], tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    res = _torchrun([train_cmd[-1], *SAC_TINY, "agent.batch_size=33", f"hydra.run.dir={run}"],
                    str(tmp_path))  # fmt: skip
    assert res.returncode != 0
    assert "agent.batch_size=33 is not allowed with 2 processes" in res.stderr
    assert res.stderr.count("error: agent.batch_size=33") == 1
    assert not os.path.exists(run)


@pytest.mark.parametrize("world", [2, 4])
def test_rank_config_splits_batches(world: int) -> None:
    from mbrl.runtime.distributed import rank_config

    cfg = mbpo_config(**{"rollout.batch_size": 100, "agent.batch_size": 256})
    share = rank_config(cfg, world)
    assert share.agent.batch_size * world == 256 and share.rollout.batch_size * world == 100
    assert share.total_steps == cfg.total_steps  # schedules count the whole run's env steps
    assert cfg.agent.batch_size == 256  # the run's own config is left as it was


def test_more_local_ranks_than_gpus_is_refused() -> None:
    from mbrl.config import ConfigError
    from mbrl.runtime.distributed import check_gpus

    with pytest.raises(ConfigError, match=r"started 4 processes .* sees 2 GPUs.*nproc_per_node=2"):
        check_gpus("cuda", 4, gpus=2)
    with pytest.raises(ConfigError, match="sees 2 GPUs"):
        check_gpus("auto", 3, gpus=2)
    check_gpus("auto", 4, gpus=0)  # no GPU: the ranks train on the CPU
    check_gpus("cpu", 4, gpus=1)
    check_gpus("cuda", 2, gpus=2)


def _two_nodes(argv: list[str], cwd: str) -> list[tuple[int, str]]:
    """``argv`` (a torchrun command) run twice at once, as on two nodes of one process each:
    each agent's (exit code, output)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    agents = [
        subprocess.Popen(
            cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    return [(p.wait(timeout=300), p.communicate()[0]) for p in agents]


def test_a_run_on_two_nodes_resumes_with_the_command_it_printed(
    train_cmd: list[str], tmp_path: str
) -> None:
    """Two torchrun agents of one process each (two "nodes" on this machine, a c10d
    rendezvous): the summary's resume command, run as printed on each node, continues the run
    from its checkpoint on both ranks. (On one machine every node matches the endpoint's host:
    what differs across machines is not checked here.)"""
    run = os.path.join(tmp_path, "run")
    nodes = ["torchrun", "--nnodes=2", "--nproc_per_node=1", "--rdzv-backend=c10d"]
    nodes += [f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--rdzv-id=two-nodes"]
    started = _two_nodes(
        [*nodes, train_cmd[-1], *SAC_TINY, "total_steps=200", f"hydra.run.dir={run}"], str(tmp_path)
    )
    assert [code for code, _ in started] == [0, 0], started
    printed = [
        line.split("resume ", 1)[1].strip()
        for _, out in started
        for line in out.splitlines()
        if line.startswith("  resume ")
    ]
    assert len(printed) == 1 and "--nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=" in printed[0]
    again = shlex.split(printed[0].replace("<more than 200>", "300"))
    assert again[-2:] == [f"resume={run}", "total_steps=300"]
    resumed = _two_nodes(again, str(tmp_path))
    assert [code for code, _ in resumed] == [0, 0], resumed
    assert any("resumed      from step 200 (ckpt/last.pt)" in out for _, out in resumed)
    assert _rows(run)[-1]["step"] == 300
