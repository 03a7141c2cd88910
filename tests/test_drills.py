"""Failure drills on real training processes: kill -9 at chosen moments and resume, Ctrl-C
(once, twice, while the run compiles), a disk that runs full while a checkpoint is written,
NaN injected into the data and the model, two runs pointed at one folder, buffers that cannot
fit in memory."""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
import torch
from test_cli import run_started
from test_mbpo import mbpo_config

from mbrl.config import ConfigError
from mbrl.model_side import ModelSide
from mbrl.runtime import checkpoint
from mbrl.runtime.capacity import buffer_bytes, check_memory
from mbrl.runtime.checkpoint import CheckpointError, load
from mbrl.runtime.runlock import RunFolderBusy
from mbrl.trainer import Trainer

from test_trainer import _assert_same, _comparable, _rows

if TYPE_CHECKING:
    from typing_extensions import Buffer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = [sys.executable, os.path.join(ROOT, "scripts", "train.py")]
# Small, but with model fits, rollouts and checkpoints long enough to be caught in the act.
MBPO_RUN = [
    "env=pendulum",
    "total_steps=1000",
    "algorithm.init_steps=300",
    "mbpo.model_train_freq=250",
    "algorithm.updates_per_step=2",
    "model.max_epochs=25",
    "model.flow.layers=2",
    "model.flow.hidden=[32]",
    "model.flow.embed_hidden=[32]",
    "model.flow.embed_dim=16",
    "rollout.batch_size=20000",
    "agent.hidden_sizes=[64,64]",
    "agent.batch_size=64",
    "eval.every=250",
    "eval.episodes=1",
    "logger.every=250",
    "device=cpu",
    "seed=3",
]
SAC_RUN = [
    "env=pendulum",
    "algorithm=sac",
    "total_steps=1200",
    "algorithm.init_steps=300",
    "algorithm.updates_per_step=2",
    "buffer.capacity=1000000",
    "eval.every=300",
    "eval.episodes=1",
    "logger.every=300",
    "device=cpu",
    "seed=3",
]
RUNS = {
    "mbpo": MBPO_RUN,
    "sac": SAC_RUN,
    # compiled (auto would not compile runs this short): the SAC block and the fit step
    "mbpo_compiled": [*MBPO_RUN, "compile=true"],
}


def _start(args: list[str], run_dir: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*TRAIN, *args, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # bytes: the bar's \r must reach the reader as it is
    )


def _finish(args: list[str], run_dir: str) -> subprocess.CompletedProcess[str]:
    proc = run_started(
        [*TRAIN, *args, f"hydra.run.dir={run_dir}", "logger.progress=false"],
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The reference runs, each trained in one go."""
    base = tmp_path_factory.mktemp("uninterrupted")
    runs = {name: str(base / name) for name in RUNS}
    for name, args in RUNS.items():
        _finish(args, runs[name])
    yield runs


def _stderr_reader(proc: subprocess.Popen[bytes]) -> tuple[list[str], threading.Thread]:
    """Collect the progress bar's output as it comes (tqdm redraws its line after a \r)."""
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        # (a BufferedReader, Popen's default bufsize; typeshed types it IO[bytes], no read1)
        while chunk := proc.stderr.read1(256):  # type: ignore[attr-defined]
            seen.append(chunk.decode("utf-8", "replace"))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return seen, thread


def _kill_when(proc: subprocess.Popen[bytes], moment: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 300
    while not moment():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the run ended before it was {what}")
        time.sleep(0.0005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _after(seen: list[str], marker: str, step: int) -> Callable[[], bool]:
    """True once the bar's latest line shows ``marker`` at or past env step ``step``."""

    def moment() -> bool:
        text = "".join(seen[-64:])
        line = text.replace("\n", "\r").rstrip("\r ").rsplit("\r", 1)[-1]
        if not line.startswith(marker):
            return False
        count = line.split("| ", 1)[1].split("/", 1)[0] if "| " in line else ""
        return count.isdigit() and int(count) >= step

    return moment


def _tmp_checkpoint(run_dir: str, after: int) -> Callable[[], bool]:
    """True while ``ckpt/last.pt`` is being written (its temporary file exists), once the
    run has passed env step ``after``."""
    ckpt = os.path.join(run_dir, "ckpt")

    def moment() -> bool:
        try:
            names = os.listdir(ckpt)
        except FileNotFoundError:
            return False
        return any(n.startswith("last.pt.tmp") for n in names) and any(
            n.startswith("iteration_") and int(n[10:-3]) >= after for n in names
        )

    return moment


def _assert_resumed_equals(reference: str, resumed: str, model: bool) -> None:
    a, b = (
        load(os.path.join(reference, "ckpt", "last.pt")),
        load(os.path.join(resumed, "ckpt", "last.pt")),
    )
    _assert_same(a["agent"], b["agent"], "agent")
    if model:
        _assert_same(a["algorithm"]["model"], b["algorithm"]["model"], "model")
        _assert_same(a["buffers"]["model"]["data"], b["buffers"]["model"]["data"], "pool")
    skip = ("model/fit_seconds",)
    strip = [{k: v for k, v in r.items() if k not in skip} for r in _comparable(_rows(reference))]
    again = [{k: v for k, v in r.items() if k not in skip} for r in _comparable(_rows(resumed))]
    assert strip == again
    evals = [r for r in again if "eval/return_mean" in r]
    assert evals and evals[-1]["step"] == a["step"]


# (algorithm, moment of the kill, the bar's text then, from which env step)
KILLS = [
    ("mbpo", "model fit", "model fit: epoch", 750),
    ("mbpo", "rollout", "rollout:", 750),
    ("mbpo", "checkpoint write", None, 500),
    ("sac", "sac updates", "train", 700),
    ("sac", "checkpoint write", None, 600),
    ("mbpo_compiled", "sac updates", "train", 700),
]


@pytest.mark.slow  # real processes, ~1 min each: .ci/run runs them (-m slow)
@pytest.mark.parametrize(("algo", "moment", "marker", "after"), KILLS)
def test_kill_9_then_resume_equals_uninterrupted(
    algo: str,
    moment: str,
    marker: str | None,
    after: int,
    uninterrupted: dict[str, str],
    tmp_path: str,
) -> None:
    run = os.path.join(tmp_path, "run")
    proc = _start(RUNS[algo], run)
    seen, reader = _stderr_reader(proc)
    if marker is None:
        _kill_when(proc, _tmp_checkpoint(run, after), "writing a checkpoint")
        assert any(n.startswith("last.pt.tmp") for n in os.listdir(os.path.join(run, "ckpt")))
    else:
        _kill_when(proc, _after(seen, marker, after), f"in a {moment}")
    reader.join(timeout=5)
    assert proc.returncode == -signal.SIGKILL
    _finish(["resume=" + run], run)
    _assert_resumed_equals(uninterrupted[algo], run, model=algo != "sac")
    assert not any(".pt.tmp" in n for n in os.listdir(os.path.join(run, "ckpt")))


def _ctrl_c(
    args: list[str], run: str, phase: str, step: int, sig: signal.Signals = signal.SIGINT
) -> str:
    """Start a run, send one SIGINT (or ``sig``) once the bar shows ``phase`` at or past
    ``step``, wait for it to stop (exit code 130, as Ctrl-C; 143 for SIGTERM) and return what
    it printed."""
    proc = _start(args, run)
    seen, reader = _stderr_reader(proc)
    moment = _after(seen, phase, step)
    deadline = time.monotonic() + 300
    while not moment() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.001)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    reader.join(timeout=5)
    text = "".join(seen)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), text[-2000:]
    return text


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_writes_last_pt_and_resumes_exactly(
    sig: signal.Signals, uninterrupted: dict[str, str], tmp_path: str
) -> None:
    """Ctrl-C, or SIGTERM (a batch scheduler's time limit, ``timeout``, ``kill``), in SAC's
    updates: the run stops after the step with its checkpoint, and resumes exactly."""
    run = os.path.join(tmp_path, "run")
    text = _ctrl_c(SAC_RUN, run, "train", 650, sig)
    why = "SIGTERM" if sig == signal.SIGTERM else "Ctrl-C"
    assert "stopped (" + why + ") at step" in text and "resume=" in text
    stopped_at = int(text.split(f"stopped ({why}) at step ")[1].split()[0])
    assert 650 <= stopped_at < 1200
    assert load(os.path.join(run, "ckpt", "last.pt"))["step"] == stopped_at
    _finish(["resume=" + run], run)
    _assert_resumed_equals(uninterrupted["sac"], run, model=False)


@pytest.mark.slow
def test_ctrl_c_in_a_model_fit_stops_after_the_epoch_and_resumes_exactly(
    uninterrupted: dict[str, str], tmp_path: str
) -> None:
    """Ctrl-C while the model fits (up to 25 epochs here; minutes on a real run): the run stops
    after the current epoch, not the whole fit, says so, and its checkpoint holds the fit in
    progress; resuming finishes that fit and the run equals the uninterrupted one."""
    run = os.path.join(tmp_path, "run")
    text = _ctrl_c(MBPO_RUN, run, "model fit: epoch", 750)
    assert "stopping after this model-fit epoch" in text
    assert "stopped (Ctrl-C) at step 750" in text
    paused = load(os.path.join(run, "ckpt", "last.pt"))["algorithm"]["model_trainer"]["paused"]
    assert paused is not None and 1 <= paused["epoch"] < 25
    _finish(["resume=" + run], run)
    _assert_resumed_equals(uninterrupted["mbpo"], run, model=True)


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _terminal_ctrl_c(
    args: list[str],
    run: str,
    env: dict[str, str],
    after: float,
    marker: str = "compiling",
    group: bool = True,
) -> str:
    """Start a run in a process group of its own, as a terminal's job; ``after`` seconds
    after it prints ``marker``, send SIGINT to the whole group (what Ctrl-C in a terminal
    does: the compiler's and the env workers' processes get it too). Returns everything the
    group wrote, once the last of its processes has ended."""
    proc = subprocess.Popen(
        [*TRAIN, *args, f"hydra.run.dir={run}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    seen, reader = _stderr_reader(proc)
    deadline = time.monotonic() + 120
    while marker not in "".join(seen):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(seen)[-2000:]
        time.sleep(0.01)
    time.sleep(after)
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:  # (the run's process alone, as scripts/seeds.py stops its runs)
        proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130, "".join(seen)[-2000:]  # at once, not after compiling
    reader.join(timeout=120)  # (the pipe closes when the group's last process has ended)
    assert not reader.is_alive()
    return "".join(seen)


@pytest.mark.slow
@pytest.mark.parametrize("after", [1.0, 8.0])
def test_ctrl_c_while_compiling_quits_at_once_and_says_nothing_was_saved(
    after: float, tmp_path: str
) -> None:
    """Ctrl-C in the compile warm-up (a cold inductor cache: it lasts tens of seconds), as a
    terminal sends it, to the run and the compiler's processes: one line, exit code 130, no
    traceback from any of them, no checkpoint and no .lock. resume= then says that nothing
    was saved, in one line; the folder starts afresh."""
    run = os.path.join(tmp_path, "run")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp_path, "inductor")}
    text = _terminal_ctrl_c(RUNS["mbpo_compiled"], run, env, after)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[-1].startswith("stopped while the run was starting (Ctrl-C): nothing was saved")
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    assert lines[-2].startswith("compiling"), text[-3000:]  # nothing else since
    assert not os.path.exists(os.path.join(run, "ckpt", "last.pt"))
    assert not os.path.exists(os.path.join(run, ".lock"))
    again = run_started([*TRAIN, f"resume={run}"], cwd=ROOT, timeout=120)
    assert again.returncode == 2 and again.stderr.count("\n") == 1, again.stderr
    assert "nothing was saved yet in this run" in again.stderr


@pytest.mark.slow
def test_sigint_to_the_run_alone_while_it_compiles_ends_its_env_workers_quietly(
    tmp_path: str,
) -> None:
    """scripts/seeds.py stops a run with SIGINT to the run's process alone: while it starts,
    it quits at once, and its async env workers (env copies, evaluation episodes) end with it
    without a word (left behind, each would find its pipe closed and print a traceback)."""
    run = os.path.join(tmp_path, "run")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp_path, "inductor")}
    vector = ["env.num_envs=4", "env.vector=async", "eval.vector=async", "eval.episodes=4"]
    text = _terminal_ctrl_c([*RUNS["mbpo_compiled"], *vector], run, env, 3.0, group=False)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[-1].startswith("stopped while the run was starting (Ctrl-C): nothing was saved")
    assert "Traceback" not in text and "Error" not in text, text[-3000:]
    assert "leaked semaphore" not in text, text[-3000:]  # (the resource tracker removes them)


@pytest.mark.slow
def test_ctrl_c_while_a_resume_compiles_leaves_the_run_as_it_was(
    uninterrupted: dict[str, str], tmp_path: str
) -> None:
    import shutil

    run = os.path.join(tmp_path, "run")
    shutil.copytree(uninterrupted["mbpo_compiled"], run)
    last = os.path.join(run, "ckpt", "last.pt")
    before = _sha(last)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp_path, "inductor")}
    text = _terminal_ctrl_c([f"resume={run}", "total_steps=1250"], run, env, 1.0)
    line = text.strip().splitlines()[-1]
    assert line == (
        "stopped while the run was starting (Ctrl-C): ckpt/last.pt still holds step 1000; "
        f"continue with: python scripts/train.py resume={run}"
    ), text[-3000:]
    assert "Traceback" not in text and _sha(last) == before
    assert not os.path.exists(os.path.join(run, ".lock"))


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_leaves_async_env_workers_running_to_the_checkpoint(
    tmp_path: str,
) -> None:
    """Env copies and evaluation episodes in worker processes: a terminal's Ctrl-C reaches
    them too, and they must live on until the run has stopped after its step and saved the
    envs' states into its checkpoint."""
    run = os.path.join(tmp_path, "run")
    vector = ["env.num_envs=2", "env.vector=async", "eval.vector=async", "eval.episodes=2"]
    text = _terminal_ctrl_c([*SAC_RUN, *vector], run, dict(os.environ), 1.0, "train")
    assert "stopped (Ctrl-C) at step" in text and "Traceback" not in text, text[-3000:]
    assert load(os.path.join(run, "ckpt", "last.pt"))["step"] > 300


@pytest.mark.slow
def test_ctrl_c_twice_in_a_model_fit_quits_in_one_line(tmp_path: str) -> None:
    """The first Ctrl-C asks for a stop after the fit's epoch; a second one, before that
    epoch ends, quits at once: one line (no checkpoint written, the last one's step, the
    resume command), exit code 130, last.pt as it was. The printed command continues."""
    run = os.path.join(tmp_path, "run")
    # The flow at its own sizes: fit epochs of ~0.5 s, long enough to Ctrl-C twice in one.
    args = [a for a in MBPO_RUN if not a.startswith("model.flow.")]
    proc = _start(args, run)
    seen, reader = _stderr_reader(proc)
    moment = _after(seen, "model fit: epoch", 750)
    deadline = time.monotonic() + 300
    while not moment():
        assert proc.poll() is None and time.monotonic() < deadline, "".join(seen)[-2000:]
        time.sleep(0.001)
    last = os.path.join(run, "ckpt", "last.pt")
    before = _sha(last)
    proc.send_signal(signal.SIGINT)
    while "stopping after this model-fit epoch" not in "".join(seen[-8:]):
        assert proc.poll() is None, "".join(seen)[-2000:]
        time.sleep(0.001)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    reader.join(timeout=5)
    text = "".join(seen)
    line = text.replace("\r", "\n").strip().splitlines()[-1]
    command = f"python scripts/train.py resume={run}"
    assert line == (
        "quit at once without saving (Ctrl-C): ckpt/last.pt holds step 750; "
        f"continue with: {command}"
    ), text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert _sha(last) == before and load(last)["step"] == 750
    assert not os.path.exists(os.path.join(run, ".lock"))
    printed = shlex.split(line.rsplit("continue with: ", 1)[1])
    resumed = run_started(
        [sys.executable, *printed[1:], "logger.progress=false"],
        cwd=ROOT,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert load(last)["step"] == 1000


def test_short_run_writes_its_last_step_to_every_log(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    _finish(
        ["env=pendulum", "algorithm=sac", "total_steps=600", "eval.every=300", "device=cpu"],
        run,
    )
    for comp in ("collector", "learner", "buffer"):
        with open(os.path.join(run, "log", comp, f"{comp}.log"), encoding="utf-8") as f:
            assert "step 600 |" in f.read(), comp
    assert any(r["step"] == 600 and "collector/envstep_count" in r for r in _rows(run))


class _FullDisk(io.BufferedWriter):
    """A file whose writes fail with ENOSPC once ``room`` bytes are written."""

    def __init__(self, path: str, room: int) -> None:
        super().__init__(io.FileIO(path, "wb"))
        self.room = room

    def write(self, data: Buffer) -> int:
        size = memoryview(data).nbytes
        if size > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= size
        return super().write(data)


def test_disk_full_during_a_checkpoint_keeps_the_last_good_one(
    tmp_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(mbpo_config(total_steps=300, **{"eval.every": 100}), run)

    def fill_disk_after_step_100() -> None:
        if trainer.env_steps == 101:
            monkeypatch.setattr(checkpoint, "_open", lambda path: _FullDisk(path, 4096))

    trainer.step_hook = fill_disk_after_step_100
    with pytest.raises(CheckpointError) as info:
        trainer.run()
    message = str(info.value)
    assert "No space left on device" in message and "last.pt is intact" in message
    monkeypatch.undo()
    ckpt = os.path.join(run, "ckpt")
    assert load(os.path.join(ckpt, "last.pt"))["step"] == 100  # the previous good state
    assert not any(".tmp" in n for n in os.listdir(ckpt))


def test_nan_in_real_data_and_model_weights_is_contained(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    cfg = mbpo_config(total_steps=400, **{"rollout.batch_size": 256})
    trainer = Trainer(cfg, run)
    assert isinstance(trainer.algo.model_side, ModelSide)

    def inject() -> None:
        if trainer.env_steps == 150:  # between the first two model phases
            with torch.no_grad():
                trainer.algo.buffer.data["obs"][[3, 50, 120], 0] = float("nan")
                trainer.algo.buffer.data["rew"][77] = float("inf")
                side = trainer.algo.model_side
                assert isinstance(side, ModelSide)
                weight = next(iter(side.model.ensemble.parameters()))
                weight.view(-1)[0] = float("nan")

    trainer.step_hook = inject
    trainer.run()
    rows = _rows(run)
    phases = [r for r in rows if "model/nonfinite_rows" in r and r["step"] >= 200]
    assert phases and all(r["model/nonfinite_rows"] == 4 for r in phases)
    assert phases[0]["model/reinits"] == 1 and phases[-1]["model/reinits"] == 1
    assert all(math.isfinite(r["model/holdout_nll"]) for r in phases)
    assert sum(r["rollout/nonfinite"] for r in phases) > 0  # NaN start states: dropped rows
    learner = [r for r in rows if "learner/nonfinite_steps" in r]
    assert learner[-1]["learner/nonfinite_steps"] > 0  # batches with a NaN row: skipped
    for net in (trainer.algo.agent.actor, trainer.algo.agent.critic):
        assert all(torch.isfinite(p).all() for p in net.parameters())
    assert all(torch.isfinite(p).all() for p in trainer.algo.model_side.model.parameters())
    pool = trainer.algo.model_side.pool.rows()
    assert all(torch.isfinite(pool[k]).all() for k in ("obs", "next_obs", "rew"))
    with open(os.path.join(run, "log", "model", "model.log"), encoding="utf-8") as f:
        assert "nonfinite_rows 4" in f.read()


def test_second_run_on_the_same_folder_is_refused(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    first = _start(SAC_RUN, run)
    _, reader = _stderr_reader(first)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(run, "metrics.jsonl")):
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.05)
    with open(os.path.join(run, ".hydra", "overrides.yaml"), encoding="utf-8") as f:
        hydra_record = f.read()
    second = run_started(
        [*TRAIN, *SAC_RUN, "seed=4", f"hydra.run.dir={run}"],
        cwd=ROOT,
        timeout=120,
    )
    assert second.returncode == 2
    assert f"run folder {run!r} is in use by a running FlowMBPO process" in second.stderr
    with open(os.path.join(run, ".hydra", "overrides.yaml"), encoding="utf-8") as f:
        assert f.read() == hydra_record  # the second run wrote nothing
    assert first.wait(timeout=600) == 0
    reader.join(timeout=5)
    assert [r["step"] for r in _rows(run) if "eval/return_mean" in r] == [300, 600, 900, 1200]
    # In-process too: a Trainer on a folder held by another process stops before writing.
    holder = _start(SAC_RUN, os.path.join(tmp_path, "held"))
    while not os.path.exists(os.path.join(tmp_path, "held", "metrics.jsonl")):
        time.sleep(0.05)
    with pytest.raises(RunFolderBusy):
        Trainer(mbpo_config(), os.path.join(tmp_path, "held"))
    holder.kill()
    holder.wait()


def test_buffers_that_cannot_fit_are_refused_before_any_folder(tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    proc = run_started(
        [*TRAIN, "env=hopper", "rollout.batch_size=1000000000000", f"hydra.run.dir={run}"],
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: rollout.batch_size=1000000000000 is too")
    assert "the largest rollout.batch_size that fits is" in err[0]
    assert not os.path.exists(run)


def test_largest_value_named_in_the_message_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    import mbrl.runtime.capacity

    monkeypatch.setattr(mbrl.runtime.capacity, "free_bytes", lambda device: 3 * 2**30)
    cfg = mbpo_config(**{"rollout.batch_size": 10**9, "total_steps": 10**6})
    with pytest.raises(ConfigError) as info:
        check_memory(cfg, 11, 3, torch.device("cpu"))
    largest = int(str(info.value).rsplit(" ", 1)[1])
    budget = mbrl.runtime.capacity.HEADROOM * 3 * 2**30
    fits = mbpo_config(**{"rollout.batch_size": largest, "total_steps": 10**6})
    assert sum(buffer_bytes(fits, 11, 3)) <= budget
    check_memory(fits, 11, 3, torch.device("cpu"))  # no error
    over = mbpo_config(**{"rollout.batch_size": largest + 1, "total_steps": 10**6})
    assert sum(buffer_bytes(over, 11, 3)) > budget
