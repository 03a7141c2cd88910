"""A plug-in as a user writes it: a module file in a folder of its own, named in
``FLOWMBPO_PLUGINS``. The run's config keeps it, so that a resume, ``scripts/evaluate.py`` and
``scripts/probe.py`` import it again without the variable; when it cannot be found, each
says which module is missing and how to make it importable, in one line."""

from __future__ import annotations

import os
import subprocess
import sys

from omegaconf import OmegaConf
from test_cli import run_started

from mbrl.runtime.checkpoint import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")

# A SAC variant whose critics' mean (not their minimum) makes the target: one file.
AGENT = """
from dataclasses import dataclass

from mbrl.agents import SAC, SACConfig, register_agent


@dataclass
class MeanQConfig(SACConfig):
    _target_: str = "meanq_agent.MeanQ"
    spread: float = 0.0  # its own key


class MeanQ(SAC):
    config = MeanQConfig

    def reduce_q(self, q):
        return q.mean(dim=0)


register_agent("meanq", MeanQConfig)
"""
TINY = [
    "env=pendulum", "total_steps=200", "eval.every=100", "eval.episodes=1", "logger.every=100",
    "logger.progress=false", "agent.hidden_sizes=[16,16]", "agent.batch_size=16",
    "algorithm=sac", "algorithm.init_steps=100", "algorithm.updates_per_step=1",
    "compile=false", "device=cpu",
]  # fmt: skip


def _env(plugins: str | None, *path: str) -> dict[str, str]:
    """The environment of a command: FLOWMBPO_PLUGINS (None: unset) and PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWMBPO_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")])
    return env if plugins is None else {**env, "FLOWMBPO_PLUGINS": plugins}


def _run(
    script: str, args: list[str], env: dict[str, str], cwd: str
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, os.path.join(SCRIPTS, script), *args]
    return run_started(cmd, env=env, cwd=cwd, timeout=600)


def _plugin(folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "meanq_agent.py"), "w", encoding="utf-8") as f:
        f.write(AGENT)
    return folder


def test_a_plugin_file_in_the_current_folder_is_refused_with_the_pythonpath_fix(
    tmp_path: str,
) -> None:
    """``python scripts/train.py`` puts scripts/ and its checkout's root on Python's path, not
    the current folder."""
    here = _plugin(str(tmp_path))
    proc = _run("train.py", ["agent=meanq"], _env("meanq_agent"), cwd=here)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "FLOWMBPO_PLUGINS: cannot import plug-in 'meanq_agent'" in lines[0]
    assert "meanq_agent.py is in the current folder: run with PYTHONPATH=." in lines[0]


def test_a_plugin_is_remembered_by_resume_evaluate_and_probe(tmp_path: str) -> None:
    plug = _plugin(os.path.join(tmp_path, "plug"))
    run, work = os.path.join(tmp_path, "run"), str(tmp_path)
    proc = _run(
        "train.py", [*TINY, "agent=meanq", f"hydra.run.dir={run}"], _env("meanq_agent", plug), work
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FlowMBPO: model-free SAC, agent meanq on pendulum" in proc.stderr  # the start block
    saved = OmegaConf.load(os.path.join(run, "config.yaml"))
    assert dict(saved.plugins) == {"meanq_agent": plug}
    assert saved.agent._target_ == "meanq_agent.MeanQ"

    bare = _env(None)  # neither the variable nor the plug-in's folder on PYTHONPATH
    more = _run("train.py", [f"resume={run}", "total_steps=300"], bare, work)
    assert more.returncode == 0, more.stderr[-2000:]
    assert "finished at step 300" in more.stderr
    assert "resume=" in more.stderr.strip().splitlines()[-1]  # the printed command: no variable
    evaluated = _run("evaluate.py", [run, "--ckpt", "last", "--episodes", "1"], bare, work)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert "[last, step 300]" in evaluated.stdout
    probed = _run("probe.py", [run, "--episodes", "1"], bare, work)
    assert probed.returncode == 0, probed.stderr[-2000:]

    # The plug-in gone from where the run found it: one line that names it, for each tool.
    os.rename(plug, plug + "_moved")
    for script, args in [
        ("train.py", [f"resume={run}", "total_steps=400"]),
        ("evaluate.py", [run]),
        ("probe.py", [run]),
    ]:
        failed = _run(script, args, bare, work)
        assert failed.returncode == 2, (script, failed.stderr[-2000:])
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1, (script, lines)
        assert "cannot import plug-in 'meanq_agent'" in lines[0], lines[0]
        assert f"the run imported it from {plug}" in lines[0] and "another version" not in lines[0]


def test_a_seeds_campaign_of_a_plugin_agent_continues_without_the_variable(
    tmp_path: str,
) -> None:
    """seeds.py checks its variants with the plug-in imported, and passes it on to its runs;
    the same command later, without the variable, finds it in the runs' saved configs."""
    plug = _plugin(os.path.join(tmp_path, "plug"))
    out = os.path.join(tmp_path, "campaign")
    args = [out, "--seeds", "0", "--vary", "agent=meanq,sac", "--procs", "2"]
    env = _env("meanq_agent", plug)
    first = _run("seeds.py", [*args, "--steps", "100", "--", *TINY], env, str(tmp_path))
    assert first.returncode == 0, first.stderr[-2000:]
    again = _run("seeds.py", [*args, "--steps", "200", "--", *TINY], _env(None), str(tmp_path))
    assert again.returncode == 0, again.stderr[-2000:]
    for arm, target in [("agent-meanq", "meanq_agent.MeanQ"), ("agent-sac", "mbrl.agents.sac.SAC")]:
        run = os.path.join(out, "runs", arm, "seed_0")
        assert OmegaConf.load(os.path.join(run, "config.yaml")).agent._target_ == target
        assert load(os.path.join(run, "ckpt", "last.pt"))["step"] == 200  # continued


def test_help_lists_a_plugins_agent_and_its_name_alone_hints_at_the_variable(
    tmp_path: str,
) -> None:
    plug = _plugin(os.path.join(tmp_path, "plug"))
    shown = _run("train.py", ["--help"], _env("meanq_agent", plug), str(tmp_path))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "agent: meanq, sac (or your own" in shown.stdout
    alone = _run("train.py", ["agent=meanq"], _env(None, plug), str(tmp_path))
    assert alone.returncode == 2
    lines = alone.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "choose one of: sac (your own agent: name its module in FLOWMBPO_PLUGINS" in lines[0]
    )
