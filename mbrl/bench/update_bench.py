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
name. The compile warm-ups of both, cold and warm, are timed in fresh processes
(``compile_warmups``).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

from mbrl.agents import SAC, SACConfig, SACUpdates
from mbrl.bench.micro import ACT, OBS, Bench, gemm_block, hopper_rows
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


# The warm-up rows' child: the SAC update and each model's fit step compiled (compile_warmups).
WARMUP_CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from mbrl.agents import SAC, SACConfig
from mbrl.models import DynamicsModel, ModelTrainer, model_config
dev = torch.device(sys.argv[1])
out = {}
t0 = time.perf_counter()
SAC(11, 3, SACConfig(), dev, compile=True).warm_up()
out["sac"] = time.perf_counter() - t0
for name in ("flow", "gaussian"):
    cfg = model_config(name)
    trainer = ModelTrainer(DynamicsModel(11, 3, cfg).to(dev), cfg, compile=True)
    t0 = time.perf_counter()
    trainer.warm_up()
    out[name] = time.perf_counter() - t0
print(json.dumps(out))
"""


def compile_warmups(device: str) -> dict[str, dict[str, float]]:
    """Seconds to compile the SAC update and each model's fit step (Hopper sizes, default
    settings) in a fresh process, twice over one new inductor cache folder: ``{"cold": ...,
    "warm": ...}`` (nothing cached, then inductor's compiled kernels on disk), each ``{"sac":
    s, "flow": s, "gaussian": s}``."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        for when in ("cold", "warm"):
            out[when] = child_json(WARMUP_CHILD, device, env=env)
    return out


# An older checkout's default SAC update and model-fit epoch, timed in a worker process; it
# uses only what every version has: SAC(obs, act, cfg, device), ReplayBuffer, ModelTrainer.
WORKER = r"""
import os, sys, time
checkout, device = sys.argv[1], sys.argv[2]
sys.path.insert(0, checkout)
import torch
torch.set_num_threads(1)
torch.set_flush_denormal(True)
import mbrl
if not os.path.abspath(mbrl.__file__).startswith(checkout + os.sep):
    sys.exit(f"imported mbrl from {mbrl.__file__}, not from {checkout}")
from mbrl.agents.sac import SAC, SACConfig
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.models import DynamicsModel, ModelTrainer
try:
    from mbrl.models import model_config
except ImportError:  # (a checkout from before models were plug-ins)
    from mbrl.config import ModelConfig as model_config  # (called with name=...)
OBS, ACT, FIELDS = 11, 3, ("obs", "act", "rew", "next_obs", "terminated")
dev = torch.device(device)
g = torch.Generator().manual_seed(5)
rows = {"obs": torch.randn(5000, OBS, generator=g)}
rows["act"] = torch.rand(5000, ACT, generator=g) * 2 - 1
rows["rew"] = torch.randn(5000, generator=g)
rows["next_obs"] = torch.randn(5000, OBS, generator=g)
rows["terminated"] = torch.rand(5000, generator=g) < 0.05
rows["truncated"] = torch.zeros(5000, dtype=torch.bool)
buf = ReplayBuffer(10000, transition_fields(OBS, ACT), dev)
buf.add({k: v.to(dev) for k, v in rows.items()})
torch.manual_seed(0)
agent = SAC(OBS, ACT, SACConfig(), dev)
gen = torch.Generator(device=dev).manual_seed(0)
fits = {}

def fit_epoch(name, n):
    if name not in fits:
        cfg = model_config(name=name)
        model = DynamicsModel(OBS, ACT, cfg).to(dev)
        trainer = ModelTrainer(model, cfg)
        d = {k: v[:n].to(dev) for k, v in rows.items()}
        target = model.targets(d["obs"], d["next_obs"], d["rew"])
        inputs = torch.cat([d["obs"], d["act"]], -1)
        model.fit_normalizers(inputs, target)
        boot = torch.randint(0, n, (cfg.members, n), generator=g).to(dev)
        fits[name] = (trainer, model.in_norm(inputs), model.out_norm(target), boot)
    trainer, x, y, boot = fits[name]
    trainer._epoch(x, y, boot, gen)

for line in sys.stdin:
    cmd, *args = line.split()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if cmd == "sac":
        for _ in range(int(args[0])):
            agent.update(buf.sample(256, gen, FIELDS), gen)
    else:
        fit_epoch(args[0], int(args[1]))
    if device == "cuda":
        torch.cuda.synchronize()
    print(time.perf_counter() - t0, flush=True)
"""


def child_json(script: str, *args: str, **run: Any) -> dict[str, Any]:
    """Run ``python -c script *args`` in a fresh process (``run``: more of subprocess.run's
    arguments) and return the JSON object its last line of output holds."""
    cmd = [sys.executable, "-c", script, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, **run)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


class ReferenceWorker:
    """An older checkout (a ``git worktree`` of it) in a worker process that times its
    default SAC update and model-fit epoch on request (:meth:`seconds`)."""

    def __init__(self, checkout: str, device: torch.device) -> None:
        path = os.path.abspath(checkout)
        if not os.path.isfile(os.path.join(path, "mbrl", "trainer.py")):
            raise ValueError(f"{checkout!r} is not a FlowMBPO checkout (no mbrl/trainer.py)")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, path, device.type],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),  # never import this folder's mbrl by accident
        )

    def seconds(self, *request: object) -> float:
        """Seconds for a request: ``"sac", updates``, that many of its SAC updates (batches
        from its buffer); ``"fit", model, rows``, one model-fit epoch over ``rows`` rows per
        member."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, request)) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the reference worker stopped (exit code {self.proc.wait()})")
        return float(answer)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
