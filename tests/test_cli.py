"""``scripts/train.py`` as a user runs it: hydra overrides, run folder, errors, resume."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from typing import Any

from mbrl.envs import ENVS
from mbrl.models import MODELS
from mbrl.overrides import check_overrides, resolvable_cfg
from mbrl.tools.config_reference import builtin

# The default algorithm (MBPO + flow model), shrunk to seconds: model phases at 100 and 200.
TINY = [
    "env=pendulum",
    "total_steps=300",
    "eval.every=150",
    "eval.episodes=2",
    "logger.every=100",
    "agent.hidden_sizes=[32,32]",
    "agent.batch_size=32",
    "device=cpu",
    "algorithm.init_steps=100",
    "mbpo.model_train_freq=100",
    "algorithm.updates_per_step=1",
    "rollout.batch_size=100",
    "model.max_epochs=2",
    "model.members=3",
    "model.elites=2",
    "model.flow.hidden=[16]",
    "model.flow.embed_hidden=[16]",
    "model.flow.embed_dim=16",
]


def _run(cmd: list[str], cwd: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    return run_started(cmd, cwd=cwd, env=env, timeout=300)


def run_started(
    cmd: list[str], again: bool = True, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of a command (its output as text), in a session of its own, as a
    terminal's job is. No test sends these commands a SIGINT: one that quit at its start on a
    SIGINT from elsewhere (this test VM has sent some to starting runs, its sender named in
    the line: exit code 130, the start's one line) runs once more; so does a seeds.py
    campaign one of whose runs did (seeds.py repeats the run's line); ``again=False``: once
    (a test that counts the command's invocations or times it)."""
    for _ in range(2 if again else 1):
        proc = subprocess.run(cmd, capture_output=True, text=True, start_new_session=True, **kwargs)
        if not stray_sigint(proc):
            break
        print(f"run again after a SIGINT from outside the test: {proc.stderr.strip()}")
    return proc


def stray_sigint(proc: subprocess.CompletedProcess[str]) -> bool:
    """A run, or a seeds.py campaign's run, quit at its start on a SIGINT it was not sent by
    its caller."""
    starting = ("stopped before the run started (", "stopped while the run was starting (")
    if proc.returncode == 130 and proc.stderr.strip().startswith(starting):
        return True
    return any(f"  it says: {line}" in proc.stderr for line in starting)


def test_bad_env_and_bad_value_fail_fast_without_a_folder(
    train_cmd: list[str], tmp_path: str
) -> None:
    run_dir = os.path.join(tmp_path, "run")
    for args, expected in [
        (["env=nonexistent"], "env='nonexistent' is not one of the env choices"),
        (["total_steps=-5"], "total_steps=-5 is not allowed"),
        (["env=pendulum", "amp=fp8"], "amp='fp8' is not allowed; choose one of: auto, off, bf16"),
        # hydra's own hint for a key it does not know is `+key=...`: refused all the same
        (["+total_step=1000"], "unknown config key 'total_step'"),
        (["total_step=1000"], "did you mean total_steps?"),
        (["+model.member=3"], "did you mean model.members?"),
        (["--env", "hopper"], "FlowMBPO takes hydra overrides, key=value (here: env=hopper)"),
        # a value of the wrong type, and hydra's '+' on a key the config has: one line each
        (["total_steps=abc"], "total_steps=abc is not allowed; it must be an integer"),
        (["total_steps=1e-3"], "a fraction is not an integer"),
        (["agent.hidden_sizes=256"], "e.g. agent.hidden_sizes=[256,256]"),
        (["+seed=3"], "write seed=3 (hydra's '+' is for a key the config lacks)"),
    ]:
        proc = _run([*train_cmd, *args, f"hydra.run.dir={run_dir}"], cwd=str(tmp_path))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert expected in proc.stderr, proc.stderr
        if args[0] == "env=nonexistent":
            assert "hopper" in proc.stderr and "pendulum" in proc.stderr  # the allowed ones
        assert not os.path.exists(run_dir)
        assert not os.path.exists(os.path.join(tmp_path, "runs"))


def test_a_typod_choice_of_any_config_group_names_the_closest(
    train_cmd: list[str], tmp_path: str
) -> None:
    """As a typo'd key: one line with the closest choice and all of them, exit code 2, before
    hydra's own error (its search path, HYDRA_FULL_ERROR) and before any folder."""
    conf = os.path.join(os.path.dirname(train_cmd[-1]), "..", "conf")
    run_dir = os.path.join(tmp_path, "run")
    for arg, close in [
        ("env=hoper", "hopper"),
        ("model=gausian", "gaussian"),
        ("algorithm=mbp", "mbpo"),
        ("agent=sacc", "sac"),
        ("algorithm_env=mbpo_hoper", "mbpo_hopper"),
        ("model_env=gaussian_humanod", "gaussian_humanoid"),
    ]:
        proc = _run([*train_cmd, arg, f"hydra.run.dir={run_dir}"], cwd=str(tmp_path))
        group, value = arg.split("=")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"error: {group}={value!r} is not one of the {group} choices")
        assert f"did you mean {close}?" in lines[0]
        if os.path.isdir(os.path.join(conf, group)):  # every file of the group is named
            for name in os.listdir(os.path.join(conf, group)):
                assert name.removesuffix(".yaml") in lines[0], name
        assert not os.path.exists(run_dir)
    models = ", ".join(sorted(builtin(MODELS)))
    proc = _run([*train_cmd, "-m", "model=flow,gausian"], cwd=str(tmp_path))  # a sweep's values
    assert proc.returncode == 2 and f"did you mean gaussian? choose one of: {models}" in proc.stderr
    assert not os.path.exists(os.path.join(tmp_path, "runs"))


def test_train_then_resume_from_the_command_line(train_cmd: list[str], tmp_path: str) -> None:
    proc = _run([*train_cmd, *TINY], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = glob.glob(
        os.path.join(tmp_path, "runs", "pendulum", "*")
    )  # runs/<env>/<date_time>
    assert "step/s" in proc.stderr and "eval_return" in proc.stderr  # the progress bar
    err = proc.stderr
    # The start block, the phases the bar names, the summary with the resume command.
    assert "FlowMBPO: MBPO + flow model (3 members, 2 elites), agent sac on pendulum" in err
    assert re.search(rf"run folder +{re.escape(run_dir)} \(process \d+\)\n", err)
    assert "tensorboard --logdir" in err and re.search("memory +real buffer", err)
    loop = (
        r"loop +a model fit and 100 rollouts \(length \d+[^)]*\) every 100 steps; 1 SAC update per"
    )
    assert re.search(loop + r" env step, \d+ % of each batch real\n", err), err  # (MBPO's keys)
    cores = os.cpu_count() or 1  # the threads it uses, and why (docs/benchmarks.md, Threads)
    why = f" of {cores} cores: safe beside other runs; alone, threads={cores} is faster"
    assert f"1 torch thread{why if cores > 1 else ''})" in err
    assert "model fit: epoch 1, holdout nll" in err and "rollout: 100 starts x" in err
    assert "finished at step 300" in err and "best" in err
    assert "estimated time to finish: about" in err and "SAC updates" in err  # once rates exist
    assert f"resume={run_dir} total_steps=" in err
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert all("step" in r for r in rows) and rows[-1]["step"] == 300
    keys = set().union(*rows)
    assert {
        "eval/return_mean",
        "learner/q_loss",
        "buffer/current_have",
        "model/holdout_nll",
    } <= keys

    assert not os.path.exists(os.path.join(run_dir, ".lock"))  # let go of at the end

    # resume= takes the run folder; its ckpt/last.pt is taken as the folder, another file is not
    best = os.path.join(run_dir, "ckpt", "ckpt_best.pt")
    proc = _run([*train_cmd, f"resume={best}", "total_steps=450"], cwd=str(tmp_path))
    assert proc.returncode == 2 and "resume= takes a run folder" in proc.stderr, proc.stderr
    assert f"(here: resume={run_dir})" in proc.stderr
    last = os.path.join(run_dir, "ckpt", "last.pt")
    more = ["total_steps=450", "max_minutes=30", "eval.episodes=1"]  # (one setting changed)
    proc = _run([*train_cmd, f"resume={last}", *more], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"resumed +from step 300 ", proc.stderr)
    changed = "changed      eval.episodes 2 -> 1 (steps to 300 ran with the values before; "
    assert changed + "config.yaml now holds the new ones)\n" in proc.stderr, proc.stderr[-3000:]
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(steps) and steps[-1] == 450
    with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
        text = f.read()
    assert "total_steps: 450" in text and "name: pendulum" in text
    assert os.path.isfile(os.path.join(run_dir, ".hydra", "overrides.yaml"))  # the original's

    # A new run into a folder that holds one is refused, every file left as it was (the folder
    # itself held the run's .lock meanwhile).
    files = [p for p in glob.glob(os.path.join(run_dir, "**"), recursive=True) if os.path.isfile(p)]
    before = {p: os.path.getmtime(p) for p in files}
    proc = _run([*train_cmd, *TINY, f"hydra.run.dir={run_dir}", "seed=1"], cwd=str(tmp_path))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert "holds a run (ckpt/last.pt): python " in lines[0]
    assert f"resume={run_dir} continues it; a new run needs a folder of its own" in lines[0]
    assert {p: os.path.getmtime(p) for p in before} == before
    assert not os.path.exists(os.path.join(run_dir, ".lock"))  # (let go of as it ended)
    # So is one whose hydra.run.dir names it through an interpolation (known only once hydra
    # has made the folder): hydra saves no .hydra/ record there either.
    named = run_dir.replace(f"{os.sep}pendulum{os.sep}", f"{os.sep}${{env.name}}{os.sep}")
    proc = _run([*train_cmd, *TINY, f"hydra.run.dir={named}", "seed=1"], cwd=str(tmp_path))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert f"hydra.run.dir={run_dir!r} holds a run (ckpt/last.pt): python " in lines[0]
    assert {p: os.path.getmtime(p) for p in before} == before

    # A resume with nothing left to do is refused at once: one line, the command that extends it.
    for more in ([], ["total_steps=400"], ["total_steps=450"]):
        proc = _run([*train_cmd, f"resume={run_dir}", *more], cwd=str(tmp_path))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
        assert f"is at step 450 and total_steps={more[0][12:] if more else 450}" in lines[0]
        assert lines[0].endswith(f"resume={run_dir} total_steps=<more than 450>")

    # The same run's data, both model kinds, one holdout split.
    compare = train_cmd[-1].replace("train.py", "compare_models.py")
    proc = _run([train_cmd[0], compare, run_dir, "--max-epochs", "1"], cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "holdout NLL" in proc.stdout
    # (each model's NLL, MSE and epochs: the same model fitted twice would print the same)
    models = {line.split()[0]: line.split()[1:4] for line in proc.stdout.splitlines()[-2:]}
    assert set(models) == {"flow", "gaussian"} and models["flow"] != models["gaussian"], proc.stdout

    # Continuing as another env is refused; a corrupt checkpoint is refused and changes nothing.
    proc = _run([*train_cmd, f"resume={run_dir}", "env=hopper"], cwd=str(tmp_path))
    assert proc.returncode != 0 and "cannot continue as env=hopper" in proc.stderr
    last = os.path.join(run_dir, "ckpt", "last.pt")
    with open(last, "wb") as f:
        f.write(b"not a checkpoint")
    before = {
        p: os.path.getmtime(p) for p in glob.glob(os.path.join(run_dir, "**"), recursive=True)
    }
    proc = _run([*train_cmd, f"resume={run_dir}", "total_steps=600"], cwd=str(tmp_path))
    assert proc.returncode != 0 and "corrupt" in proc.stderr, proc.stderr[-2000:]
    after = {p: os.path.getmtime(p) for p in before}
    assert before == after
    open(last, "wb").close()  # (an empty file: a write cut short)
    proc = _run([*train_cmd, f"resume={run_dir}", "total_steps=600"], cwd=str(tmp_path))
    assert proc.returncode == 2 and "is empty (0 bytes)" in proc.stderr, proc.stderr[-2000:]


def test_help_lists_the_groups_a_user_picks(train_cmd: list[str], tmp_path: str) -> None:
    """--help names each group's options (as conf/ and the model and env registries hold
    them), not algorithm_env."""
    proc = _run([*train_cmd, "--help"], cwd=str(tmp_path))
    assert proc.returncode == 0 and "algorithm_env:" not in proc.stdout
    conf = os.path.join(os.path.dirname(train_cmd[-1]), "..", "conf")
    algorithms = sorted(f[:-5] for f in os.listdir(os.path.join(conf, "algorithm")))
    assert f"algorithm: {', '.join(algorithms)}" in proc.stdout
    assert f"env: {', '.join(sorted(ENVS))}" in proc.stdout  # (registered: mbrl/envs/specs.py)
    line = next(x for x in proc.stdout.splitlines() if x.strip().startswith("model:"))
    assert sorted(line.split(":")[1].split("(")[0].replace(",", " ").split()) == sorted(
        builtin(MODELS)
    )


def test_an_integral_float_is_taken_for_an_integer_key(train_cmd: list[str], tmp_path: str) -> None:
    """``total_steps=1e4`` is how people write steps: 10000 (1.5e3: 1500), in a sweep too."""
    for arg, want in [("total_steps=1e4", 10000), ("total_steps=1.5e3", 1500)]:
        proc = _run([*train_cmd, "env=pendulum", arg, "--cfg", "job"], cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"\ntotal_steps: {want}\n" in proc.stdout
    conf = os.path.join(os.path.dirname(train_cmd[-1]), "..", "conf")
    got = check_overrides(["total_steps=1e3,2.5e3", "model.lr=1e-3", "seed=2"], conf)
    assert got == ["total_steps=1000,2500", "model.lr=1e-3", "seed=2"]


def test_cfg_hydra_resolve_prints_the_run_folder_resolved(
    train_cmd: list[str], tmp_path: str
) -> None:
    """``--cfg hydra --resolve`` (hydra's documented way to see its resolved config) was a
    traceback: the run folder's interpolations read job keys that ``--cfg hydra`` leaves out.
    Now it prints hydra's node resolved, the run folder named from the env chosen."""
    for flags in (["--cfg", "hydra", "--resolve"], ["--resolve", "-c", "hydra", "-p", "hydra.run"]):
        proc = _run([*train_cmd, "env=walker2d", *flags], cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-2000:]
        package = flags[-1] if "-p" in flags else "hydra"
        assert proc.stdout.startswith(f"# @package {package}\n"), proc.stdout[:200]
        assert re.search(r"\n *dir: runs/walker2d/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d\n", proc.stdout)
        assert "${" not in proc.stdout.split("sweep:")[0]
    assert resolvable_cfg(["train.py", "--cfg", "job", "--resolve"])[1:3] == ["--cfg", "job"]
    assert resolvable_cfg(["train.py", "--cfg", "hydra"]) == ["train.py", "--cfg", "hydra"]


def test_a_sigterm_while_the_run_starts_quits_at_once_in_one_line(
    train_cmd: list[str], tmp_path: str
) -> None:
    """SIGTERM is answered as Ctrl-C is: while the run starts (here its compile warm-up) it
    quits at once in one line, exit code 143, and lets go of the run folder."""
    import signal

    run = os.path.join(tmp_path, "run")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp_path, "inductor")}
    args = [*TINY, "algorithm=sac", "compile=true", f"hydra.run.dir={run}"]
    proc = subprocess.Popen(
        [*train_cmd, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # (the compile warm-up: a cold cache of its own, seconds long)
        if line.startswith("compiling"):
            break
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    last = [line for line in proc.stderr.read().splitlines() if line.strip()][-1]
    assert last.startswith("stopped while the run was starting (SIGTERM): nothing was saved")
    assert not os.path.exists(os.path.join(run, ".lock"))


def test_a_sigint_from_another_process_is_named_in_the_one_line(
    train_cmd: list[str], tmp_path: str
) -> None:
    """A SIGINT while the run starts quits at once in one line; sent by a process other than
    a terminal or the run's own parent (here a ``kill`` from elsewhere), the line names it."""
    import signal
    import sys

    run = os.path.join(tmp_path, "run")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp_path, "inductor")}
    args = [*TINY, "algorithm=sac", "compile=true", f"hydra.run.dir={run}"]
    proc = subprocess.Popen(
        [*train_cmd, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # (as a terminal's job, as _run's)
    )  # fmt: skip
    assert proc.stderr is not None
    printed = []
    for line in proc.stderr:  # (the compile warm-up: a cold cache of its own, seconds long)
        printed.append(line)
        if line.startswith("compiling"):
            break
    kill = f"import os, time; os.kill({proc.pid}, {int(signal.SIGINT)}); time.sleep(60)"
    killer = subprocess.Popen([sys.executable, "-c", kill])  # (alive while its line is read)
    try:
        assert proc.wait(timeout=60) == 130, "".join(printed)
    finally:
        killer.kill()
        killer.wait()
    last = [line for line in proc.stderr.read().splitlines() if line.strip()][-1]
    who = f"SIGINT from process {killer.pid}: {f'{sys.executable} -c {kill}'[:160]}"
    assert last.startswith(f"stopped while the run was starting ({who}): nothing was saved")


def test_a_run_stopped_with_ctrl_z_leaves_the_pause_out_of_its_times(
    train_cmd: list[str], tmp_path: str
) -> None:
    """kill -STOP for 4 s (Ctrl-Z stops a run alike), then kill -CONT: the log interval that
    held the pause says so in ``time/paused``, its ``time/wall`` and phases leave it out (they
    add up to the wall clock less the pause), no other interval reports a pause, and the
    summary says how long the run stood stopped."""
    import signal
    import time

    run = os.path.join(tmp_path, "run")
    args = [*TINY, "total_steps=500", "eval.every=500", "logger.progress=false"]
    proc = subprocess.Popen(
        [*train_cmd, *args, f"hydra.run.dir={run}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # (as a terminal's job, as _run's)
    )
    metrics, deadline = os.path.join(run, "metrics.jsonl"), time.time() + 120

    def logged() -> bool:  # (a log interval timed: the run is past its first one)
        if not os.path.isfile(metrics):
            return False
        with open(metrics, encoding="utf-8") as f:
            return '"time/wall"' in f.read()

    while not logged():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate()[1][-2000:])
        time.sleep(0.05)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(4.0)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    with open(metrics, encoding="utf-8") as f:
        timed = [r for r in map(json.loads, f) if "time/wall" in r]
    paused = [r for r in timed if "time/paused" in r]
    assert len(paused) == 1 and 3.5 < paused[0]["time/paused"] < 4.6, paused
    before = timed[timed.index(paused[0]) - 1]
    stamps = paused[0]["time"] - before["time"]  # the wall clock between the two logs
    assert abs(stamps - paused[0]["time/wall"] - paused[0]["time/paused"]) < 1.0
    phases = sum(v for k, v in paused[0].items() if k.startswith("time/") and k[5:] not in
                 ("wall", "paused"))  # fmt: skip
    assert abs(phases - paused[0]["time/wall"]) < 1e-6
    said = re.search(
        r"finished at step 500 after .* in this process \(and ([\d.]+) s stopped\)", err
    )
    assert said and 3.5 < float(said.group(1)) < 4.6, err[-2000:]


def test_the_sigint_line_names_only_an_unexpected_sender() -> None:
    """A terminal's Ctrl-C (the kernel), the run's parent and the run itself go unnamed; a
    timer, or another process (with its command line), is named."""
    import time

    from mbrl.runtime.interrupt import sender

    assert sender(0, 0x80) == sender(os.getppid(), 0) == sender(os.getpid(), -6) == ""
    assert sender(2076534103, -2) == "SIGINT from a POSIX timer"
    other = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.time() + 10
        while time.time() < deadline:  # (until it has exec'd: before, it shows this process)
            with open(f"/proc/{other.pid}/cmdline", "rb") as f:
                if f.read().startswith(b"sleep"):
                    break
            time.sleep(0.01)
        assert sender(other.pid, 0) == f"SIGINT from process {other.pid}: sleep 30"
        # a siginfo of the sender's own making (rt_sigqueueinfo): its pid, and the odd code
        odd = f"SIGINT from process {other.pid}: sleep 30 (si_code -961346640)"
        assert sender(other.pid, -961346640) == odd
    finally:
        other.kill()
        other.wait()
    assert sender(other.pid, 0) == f"SIGINT from process {other.pid}: ended since (si_code 0)"
    gone = f"SIGINT from process {other.pid}: ended since (si_code -961346640)"
    assert sender(other.pid, -961346640) == gone
