"""Commands the program prints or runs with a run folder in them read back, through the shell
and hydra's own override parser, as that folder, whatever its name holds."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from mbrl.config import ConfigError
from mbrl.runtime.report import resume_command
from mbrl.tools.seed_runs import Job, Variant

FOLDERS = [
    "runs/hopper/2026-12-07_02-30-00",  # a plain run's
    # a multirun job's (conf/config.yaml: <num>_<override_dirname>)
    "runs/sweeps/pendulum/2026-12-07_02-30-00/1_env=pendulum,rollout.max_length=10",
    "/tmp/my runs/it's here",
    '/tmp/a "quoted" name',
    "/home/józef/runs/été",  # (hydra takes ASCII letters alone unquoted)
    "null",  # (bare, hydra would read None: a fresh run)
    "1e3",
    "ends\\",
    'a\\"b',
]


def _parsed(override: str) -> tuple[str, object]:
    (o,) = OverridesParser.create().parse_overrides([override])
    return o.key_or_group, o.value()


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_printed_resume_command_names_the_folder(folder: str) -> None:
    argv = shlex.split(resume_command(folder))
    assert argv[:2] == ["python", "scripts/train.py"] and len(argv) == 3
    assert _parsed(argv[2]) == ("resume", folder)


def test_a_plain_folder_is_printed_as_it_is() -> None:
    assert resume_command(FOLDERS[0]) == f"python scripts/train.py resume={FOLDERS[0]}"


@pytest.mark.parametrize("folder", FOLDERS[1:])
def test_seeds_py_starts_and_resumes_a_run_in_such_a_folder(folder: str, tmp_path: Path) -> None:
    job = Job(Variant(("agent.hidden_sizes=[64,64]",)), 0, folder)
    start = job.command(["env=pendulum"], 1000, 1, None)
    assert _parsed(start[-1]) == ("hydra.run.dir", folder)
    assert ("agent.hidden_sizes", [64, 64]) in [_parsed(a) for a in start[2:-1]]
    job.path = str(tmp_path / "1_env=pendulum,seed=3")  # (one with a checkpoint is resumed)
    os.makedirs(os.path.join(job.path, "ckpt"))
    Path(job.path, "ckpt", "last.pt").write_bytes(b"")
    assert _parsed(job.command([], 1000, 1, None)[2]) == ("resume", job.path)


def test_a_torchrun_run_is_resumed_under_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 2 processes refuses a resume by 1 (mbrl.runtime.checkpoint): the command
    printed by its ranks (torchrun sets WORLD_SIZE) starts as many; on several nodes, with
    the rendezvous its ranks met at, to be run on each node."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    argv = shlex.split(resume_command(FOLDERS[1]))
    assert argv[:3] == ["torchrun", "--nproc_per_node=2", "scripts/train.py"]
    assert _parsed(argv[3]) == ("resume", FOLDERS[1])
    assert resume_command(FOLDERS[0], world=1).startswith("python scripts/train.py ")
    monkeypatch.setenv("WORLD_SIZE", "8")  # (two nodes of four)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("MASTER_ADDR", "node-a.cluster")  # (as torchrun sets them)
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "hopper 1")
    argv = shlex.split(resume_command(FOLDERS[0]))
    assert argv[:7] == [
        "torchrun",
        "--nnodes=2",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node-a.cluster:29500",
        "--rdzv-id=hopper 1",
        "--nproc_per_node=4",
        "scripts/train.py",
    ]


def test_resume_given_last_pt_becomes_its_folder_as_hydra_reads_it(tmp_path: Path) -> None:
    """``resume=<run>/ckpt/last.pt`` is taken as ``resume=<run>`` (mbrl.overrides), quoted
    for hydra where the folder's name needs it."""
    from mbrl.overrides import resume_folders

    run = tmp_path / "1_env=pendulum,seed=3"
    os.makedirs(run / "ckpt")
    (run / "ckpt" / "last.pt").write_bytes(b"")
    (arg,) = resume_folders([f"resume={run / 'ckpt' / 'last.pt'}"])
    assert _parsed(arg) == ("resume", str(run))
    # Another checkpoint file is refused; the override the message offers, pasted into a
    # shell, reads back as the folder.
    (run / "ckpt" / "ckpt_best.pt").write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file") as refused:
        resume_folders([f"resume={run / 'ckpt' / 'ckpt_best.pt'}"])
    offered = str(refused.value).split("(here: ", 1)[1].split("). To", 1)[0]
    assert [_parsed(a) for a in shlex.split(offered)] == [("resume", str(run))]
    # A file outside a run's ckpt/ (a notes file, a copied checkpoint) offers no folder.
    (run / "notes.txt").write_text("seed 3")
    with pytest.raises(ConfigError, match="is a file, not a run folder: give the run's folder"):
        resume_folders([f"resume={run / 'notes.txt'}"])


def test_a_full_disk_met_by_a_log_write_is_one_line_with_the_resume_command(
    tmp_path: Path,
) -> None:
    """With a checkpoint: the command that continues the run; before the first one: that
    nothing was saved (a resume would be refused for want of a checkpoint)."""
    import errno

    from mbrl.runtime.report import disk_full_text

    run = str(tmp_path / "1_env=pendulum,seed=3")
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/x/log/model/model.log")
    early = disk_full_text(full, run)
    assert early == (
        f"the disk ran full writing /runs/x/log/model/model.log: nothing was saved yet ({run} "
        "holds no checkpoint); free some disk space, then run the command again to start "
        "afresh (this folder can be removed)"
    )
    os.makedirs(os.path.join(run, "ckpt"))
    Path(run, "ckpt", "last.pt").write_bytes(b"x")
    text = disk_full_text(full, run)
    assert text is not None and "\n" not in text
    assert text.startswith("the disk ran full writing /runs/x/log/model/model.log: ckpt/last.pt")
    assert _parsed(shlex.split(text.rsplit("then ", 1)[1])[2]) == ("resume", run)
    batch = disk_full_text(full, run, "the batch's command")
    assert batch is not None and batch.endswith("then the batch's command")
    assert disk_full_text(OSError(errno.EACCES, "Permission denied"), run) is None


def test_a_resume_of_no_run_says_what_the_path_is(tmp_path: Path) -> None:
    """resume= of a path that does not exist, of a folder of runs, of a seeds.py campaign:
    each says what it is and what to give instead."""
    from mbrl.launch import _no_run_here

    assert _no_run_here(str(tmp_path / "nope")) == "does not exist"
    os.makedirs(tmp_path / "runs" / "a")
    (tmp_path / "runs" / "a" / "config.yaml").write_text("seed: 0\n")
    said = _no_run_here(str(tmp_path / "runs"))
    assert said == f"holds runs but is not one: give a run folder, e.g. {tmp_path / 'runs' / 'a'}"
    (tmp_path / "runs" / "seeds.json").write_text("{}")
    assert _no_run_here(str(tmp_path / "runs")).startswith("a scripts/seeds.py campaign, not a")
