"""Evaluate a trained run: load a checkpoint, run deterministic episodes, optionally film one.

Used by ``scripts/evaluate.py``; every failure is a :class:`EvaluateError` with a message that
names the file and what is wrong.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from typing import Any

import numpy as np
import torch

from mbrl.agents import SAC, build_agent
from mbrl.config import Config, ConfigError
from mbrl.envs import env_dims, make_env
from mbrl.evaluator import EVAL_SEED, Evaluator
from mbrl.runtime.checkpoint import CheckpointError, load
from mbrl.runtime.utils import configure_cpu, resolve_device
from mbrl.runtime.validate import load_config
from mbrl.tools.plotting import read_metrics


class EvaluateError(RuntimeError):
    """The run folder, checkpoint or video request cannot be used."""


def load_run(run_dir: str, which: str) -> tuple[Config, dict[str, Any]]:
    """The run's config and the chosen checkpoint (``best`` | ``last`` | ``N``, the env steps
    of an ``iteration_N.pt`` snapshot), checked against each other."""
    cfg_path = os.path.join(run_dir, "config.yaml")
    if not os.path.isfile(cfg_path):
        raise EvaluateError(not_a_run(run_dir))
    try:
        cfg = load_config(cfg_path, read_here=True)  # (a GPU run is read on the CPU too)
    except ConfigError as err:
        raise EvaluateError(f"{cfg_path}: {err}") from None
    names = {"best": "ckpt_best.pt", "last": "last.pt"}
    given, which = which, {"ckpt_best.pt": "best", "last.pt": "last"}.get(which, which)
    which = which.removeprefix("iteration_").removesuffix(".pt")  # (a snapshot's file name)
    if which not in names and not which.isdigit():
        why = "use best, last or an env-step count N"
        raise EvaluateError(f"--ckpt {given!r} is not allowed; {why}")
    path = os.path.join(run_dir, "ckpt", names.get(which, f"iteration_{which}.pt"))
    if not os.path.isfile(path):
        folder = os.path.dirname(path)
        have = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        raise EvaluateError(
            f"checkpoint {path!r} does not exist; the run has: {', '.join(have) or 'none'}"
        )
    try:
        state = load(path, env_name=cfg.env.name)
    except CheckpointError as err:
        raise EvaluateError(str(err)) from None
    return cfg, state


def not_a_run(path: str) -> str:
    """Why ``path`` is no run folder, and what to give instead."""
    if not os.path.exists(path):
        return f"{path!r} does not exist"
    ckpt = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if os.path.isfile(path) and (ckpt != "ckpt" or not path.endswith(".pt")):
        return f"{path!r} is a file, not a run folder: give the folder that holds it"
    if os.path.isfile(path):
        names = {"last.pt": "last", "ckpt_best.pt": "best"}
        name = os.path.basename(path)
        which = names.get(name) or name.removeprefix("iteration_").removesuffix(".pt")
        run = os.path.dirname(os.path.dirname(os.path.abspath(path)))
        return f"{path!r} is a file; give its run folder and the checkpoint: {run} --ckpt {which}"
    runs = sorted(os.path.dirname(c) for c in glob.glob(os.path.join(path, "**", "config.yaml"),
                                                         recursive=True))  # fmt: skip
    if runs:
        more = f" (and {len(runs) - 1} more)" if len(runs) > 1 else ""
        return f"{path!r} holds runs but is not one: give a run folder, e.g. {runs[0]}{more}"
    return f"{path!r} is not a FlowMBPO run folder: no config.yaml"


def check_video_path(path: str) -> None:
    """Before any episode runs: ``--video``'s folder exists, and an .mp4 has its writer."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise EvaluateError(f"--video {path}: the folder {folder} does not exist; create it first")
    if not path.endswith(".gif") and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise EvaluateError(
            f"--video {path}: only .gif can be written here (an .mp4 needs imageio-ffmpeg: "
            'pip install -e ".[video]")'
        )


def logged_return(run_dir: str, step: int) -> float | None:
    """The evaluation return the run logged at ``step`` (metrics.jsonl), if it logged one."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        return None
    found = None
    for row in read_metrics(path):  # (a line cut by a kill is left out)
        if row.get("step") == step and row.get("eval/return_mean") is not None:
            found = float(row["eval/return_mean"])  # (the last, after any resume)
    return found


def build_actor(cfg: Config, state: dict[str, Any], device: torch.device) -> SAC:
    env = make_env(cfg.env.name, cfg.env.max_episode_steps, version=cfg.env.version)
    obs_dim, act_dim = env_dims(env)
    env.close()
    agent: SAC = build_agent(obs_dim, act_dim, cfg.agent, device=device)  # (the run's agent class)
    agent.actor.load_state_dict(state["agent"]["actor"])
    return agent


def evaluate(
    run_dir: str, which: str, episodes: int | None, seed: int | None, sample: bool = False
) -> dict[str, float]:
    """Deterministic episodes with the checkpoint's actor, episode i from env seed
    ``seed + i``; returns ``eval/*`` numbers, and the ``step``, ``seed`` and ``episodes``.
    ``episodes``/``seed`` None: training's evaluation (``eval.episodes`` episodes from seed
    ``seed + EVAL_SEED``), which gives the return the run logged at the checkpoint's step.
    ``sample``: actions drawn from the policy (as training acts), from a generator seeded
    with ``seed``: is a behaviour the deterministic policy's alone?"""
    if episodes is not None and episodes < 1:
        raise EvaluateError(f"--episodes {episodes} is not allowed; it must be >= 1")
    cfg, state = load_run(run_dir, which)
    episodes = cfg.eval.episodes if episodes is None else episodes
    seed = cfg.seed + EVAL_SEED if seed is None else seed
    configure_cpu(cfg.threads, cfg.flush_denormal)
    device = resolve_device(cfg.device)
    agent = build_actor(cfg, state, device)
    evaluator = Evaluator(
        cfg.env.name,
        episodes,
        seed,
        device,
        cfg.env.max_episode_steps,
        vector=cfg.eval.vector,
        version=cfg.env.version,
    )
    try:
        gen = torch.Generator(device=device).manual_seed(seed) if sample else None
        result = evaluator.run(lambda obs: agent.act(obs, not sample, gen))
    finally:
        evaluator.close()
    return {**result, "step": float(state["step"]), "seed": seed, "episodes": episodes}


def record_video(run_dir: str, which: str, path: str, seed: int, fps: int = 30) -> int:
    """Film one deterministic episode to ``path`` (.gif, or .mp4 with imageio-ffmpeg)."""
    os.environ.setdefault("MUJOCO_GL", "egl")  # headless MuJoCo; osmesa also works if installed
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # classic-control envs draw with pygame
    cfg, state = load_run(run_dir, which)
    agent = build_actor(cfg, state, torch.device("cpu"))
    try:
        env = make_env(
            cfg.env.name, cfg.env.max_episode_steps, "rgb_array", version=cfg.env.version
        )
        obs, _ = env.reset(seed=seed)
        frames = [env.render()]
    except Exception as err:  # missing GL / pygame shows up here, with many exception types
        raise EvaluateError(
            f"cannot render {cfg.env.name!r} headless ({type(err).__name__}: {err}); install the "
            "'video' extra and an OpenGL backend (MUJOCO_GL=egl needs libEGL, osmesa needs "
            "libosmesa6)"
        ) from None
    done = False
    while not done:
        act = agent.act(torch.as_tensor(obs, dtype=torch.float32)[None], True, None)
        obs, _, term, trunc, _ = env.step(act[0].numpy())
        frames.append(env.render())
        done = bool(term or trunc)
    env.close()
    import imageio.v2 as imageio

    video = np.stack([np.asarray(f) for f in frames])  # [T, H, W, 3] uint8
    try:
        if path.endswith(".gif"):
            imageio.mimsave(path, list(video), duration=1000 / fps, loop=0)
        else:
            imageio.mimsave(path, list(video), fps=fps)
    except Exception as err:  # e.g. .mp4 without imageio-ffmpeg
        raise EvaluateError(f"cannot write {path!r}: {err}; try a .gif path") from None
    return len(frames)
