"""The update rows of ``scripts/bench.py``: the block of G SAC updates that follows an env step
and the model fit's epoch, per setting (amp, compile, CUDA graphs), side by side, and
optionally an older checkout's defaults timed in a worker process in the same rounds
(``--reference PATH``).

Each setting runs :class:`mbrl.agents.SACUpdates` on batches drawn from a buffer of Hopper-sized
transitions, as the loop does; compiling is timed separately (``warmup_s``) and kept out of
the rates. The settings and two GEMM blocks take turns in short rounds, so that a slow spell of
a shared machine hits them alike: ``time_vs_first`` is the median per-round ratio of a
setting's time to the first setting's, ``share_of_gemm`` its FLOP rate over the GEMM rate
timed in the same round. Every row says what ran (``ran``: ``compiled, graphed``, ``eager
(compile failed: ...)``, ...): a fast path that fell back is named, never timed under its
name.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.bench.micro import ACT, OBS, Bench, gemm_block, hopper_rows
from mbrl.bench.reference_worker import ReferenceWorker
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.compiled import tf32_matmuls
from mbrl.models import DynamicsModel, ModelTrainer, model_config

FIELDS = ("obs", "act", "rew", "next_obs", "terminated")


class RealRows:
    """A batch source for :class:`SACUpdates`: a buffer of ``rows`` random transitions
    (Hopper-sized by default)."""

    def __init__(
        self, device: torch.device | str, rows: int = 5000, obs: int = OBS, act: int = ACT
    ) -> None:
        self.real = ReplayBuffer(2 * rows, transition_fields(obs, act), device)
        self.real.add(hopper_rows(rows, device, obs, act))

    def batch(self, batch_size: int, gen: torch.Generator) -> dict[str, Tensor]:
        return self.real.sample(batch_size, gen, FIELDS)

    def batch_layout(self) -> Hashable:
        return "real"


def settings(cuda: bool, compile: bool = True) -> dict[str, dict[str, Any]]:
    """The settings timed: eager, compiled, and on CUDA graphed, each with amp off and bf16
    (on CUDA with TF32 matmuls, as a run's ``tf32=true``)."""
    ways = [("eager", False, False)]
    if compile:
        ways.append(("compiled", True, False))
        if cuda:
            ways.append(("graphed", True, True))
    return {
        f"{way}, amp={amp}": {"amp": amp, "compile": c, "graphs": g, "tf32": cuda}
        for way, c, g in ways
        for amp in ("off", "bf16")
    }


def sac_updates(
    b: Bench,
    variants: dict[str, dict[str, Any]],
    batch_size: int = 256,
    updates: int = 20,
    reference: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per setting (``amp``, ``compile``, ``graphs``): SAC updates/s of blocks of ``updates``
    updates, the FLOPs of one update, its share of the GEMM rate, its time against the
    first setting's and what ran; ``reference``: also an older checkout's default, as
    ``"reference"``."""
    runs: dict[str, Callable[[], object]] = {}
    blocks: dict[str, SACUpdates] = {}
    out: dict[str, dict[str, Any]] = {}
    for name, v in variants.items():
        blocks[name], warmup = sac_block(b.device, v, batch_size)
        out[name] = {"flops_per_update": _flops(b.device, v, batch_size), "warmup_s": warmup}
        for _ in range(WARM_BLOCKS):
            blocks[name](updates)
        runs[name] = partial(blocks[name], updates)
    g256, f256 = gemm_block(256, b.device)
    g1024, f1024 = gemm_block(1024, b.device)
    with contextlib.ExitStack() as stack:
        if reference is not None:
            worker = stack.enter_context(contextlib.closing(ReferenceWorker(reference, b.device)))
            out["reference"] = {"flops_per_update": out[next(iter(out))]["flops_per_update"]}
            runs["reference"] = partial(worker.seconds, "sac", updates)
        # 4 rounds per repeat: 20 at the default 5 (a quick --repeats 1 takes 4)
        t = b.side_by_side({**runs, "g256": g256, "g1024": g1024}, 4 * b.repeats)
    gemm = [max(f256 / a, f1024 / c) for a, c in zip(t["g256"], t["g1024"], strict=True)]
    first = next(iter(out))
    for name, r in out.items():
        r["updates_per_s"] = updates / statistics.median(t[name])
        r["flop_per_s"] = r["flops_per_update"] * r["updates_per_s"]
        flops = r["flops_per_update"] * updates
        r["share_of_gemm"] = statistics.median(
            flops / s / g for s, g in zip(t[name], gemm, strict=True)
        )
        r["time_vs_first"] = statistics.median(
            s / f for s, f in zip(t[name], t[first], strict=True)
        )
        r["ran"] = blocks[name].ran if name in blocks else "the reference's default"
    return out


# Blocks run before timing: a CUDA graph is captured at the fourth (GraphedStep's warmup 3).
WARM_BLOCKS = 5


def sac_block(device: torch.device, v: dict[str, Any], batch_size: int) -> tuple[SACUpdates, float]:
    """The G-update block of one setting (``amp``, ``compile``, ``graphs``, ``tf32``), and
    the seconds its compile warm-up took (0 when not compiling)."""
    torch.manual_seed(0)
    agent = SAC(OBS, ACT, SACConfig(batch_size=batch_size), device, v["amp"], v["compile"])
    tf32 = v.get("tf32", False)
    t0 = time.perf_counter()
    with tf32_matmuls(tf32):  # (as the blocks run: no recompiling)
        compiled = agent.warm_up()
    warmup = time.perf_counter() - t0 if compiled is not None else 0.0
    gen = torch.Generator(device=device).manual_seed(0)
    graphs = v.get("graphs", False)
    return SACUpdates(agent, RealRows(device), batch_size, gen, graphs, tf32), warmup


def _flops(device: torch.device, v: dict[str, Any], batch_size: int) -> float:
    """FLOPs of one eager update of this setting (matmuls, counted by torch)."""
    agent = SAC(OBS, ACT, SACConfig(batch_size=batch_size), device, v["amp"])
    gen = torch.Generator(device=device).manual_seed(0)
    data = RealRows(device, rows=batch_size)
    with FlopCounterMode(display=False) as counter:
        agent.update(data.batch(batch_size, gen), gen)
    return float(counter.get_total_flops())


def model_fits(
    b: Bench, variants: dict[str, dict[str, Any]], rows: int = 5000, reference: str | None = None
) -> dict[str, dict[str, Any]]:
    """Per setting (``model``, ``amp``, ``compile``, ``graphs``): model-fit samples/s of one
    epoch over ``rows`` rows per member (7 members), side by side, with the compile warm-up
    timed apart and what ran; ``reference``: an older checkout's default fit of each model
    as ``"reference, <model>"``."""
    runs: dict[str, Callable[[], object]] = {}
    trainers: dict[str, ModelTrainer] = {}
    out: dict[str, dict[str, Any]] = {}
    for name, v in variants.items():
        runs[name], trainers[name], warmup = fit_epoch(b.device, v, rows)
        out[name] = {"warmup_s": warmup}
    with contextlib.ExitStack() as stack:
        if reference is not None:
            worker = stack.enter_context(contextlib.closing(ReferenceWorker(reference, b.device)))
            for model in dict.fromkeys(v["model"] for v in variants.values()):
                runs[f"reference, {model}"] = partial(worker.seconds, "fit", model, rows)
                out[f"reference, {model}"] = {}
        t = b.side_by_side(runs)
    for name, r in out.items():
        r["samples_per_s"] = 7 * rows / statistics.median(t[name])
        r["ran"] = trainers[name].step.ran if name in trainers else "the reference's default"
    return out


def fit_epoch(
    device: torch.device, v: dict[str, Any], rows: int
) -> tuple[Callable[[], object], ModelTrainer, float]:
    """One model-fit epoch of a setting (``model``, ``amp``, ``compile``, ``graphs``,
    ``tf32``) as a callable, its trainer, and its compile warm-up in seconds."""
    cfg = model_config(v["model"])
    torch.manual_seed(0)
    model = DynamicsModel(OBS, ACT, cfg).to(device)
    trainer = ModelTrainer(model, cfg, v["amp"], v["compile"], v.get("graphs", False))
    tf32 = v.get("tf32", False)
    t0 = time.perf_counter()
    with tf32_matmuls(tf32):  # (as the epochs run: no recompiling)
        compiled = trainer.warm_up()
    warmup = time.perf_counter() - t0 if compiled is not None else 0.0
    d = hopper_rows(rows, device)
    target = model.targets(d["obs"], d["next_obs"], d["rew"])
    inputs = torch.cat([d["obs"], d["act"]], -1)
    model.fit_normalizers(inputs, target)
    x, y = model.in_norm(inputs), model.out_norm(target)
    gen = torch.Generator(device=device).manual_seed(0)
    boot = torch.randint(0, rows, (cfg.members, rows), device=device, generator=gen)

    def epoch() -> Tensor:
        with tf32_matmuls(tf32):
            return trainer._epoch(x, y, boot, gen)

    return epoch, trainer, warmup
