"""How a run is made fast: ``amp=auto`` per component and ``compile=auto``, each decided from
the config and the device alone (so a resumed run decides as the original did, unless its own
``max_minutes`` is too short to compile in), with the measurements behind each rule in
docs/benchmarks.md."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from mbrl.compiled import Speed
from mbrl.config import Config
from mbrl.schedule import sac_updates

# amp=auto, per component and device: fp32 on CPUs (bf16 autocast measured slower there); on
# CUDA, SAC fp32 (bf16 bought its small layers 5 % on an H200, not worth its rounding in the
# critic's targets) and bf16 hidden layers for the model's ensemble and rollouts (reasoned,
# not timed yet): docs/benchmarks.md ("Measured: one NVIDIA H200").
AUTO_AMP: dict[str, dict[str, str]] = {
    "cpu": {"sac": "off", "model": "off"},
    "cuda": {"sac": "off", "model": "bf16"},
}

# compile=auto rests on measurements of each kind of machine (docs/benchmarks.md, "compile=auto
# on a CPU" and "Measured: one NVIDIA H200"): the G-update SAC block's updates/s eager and
# compiled (scripts/bench.py --sac-only), and the warm-up's compiles with an empty inductor
# cache (the SAC update and the flow's fit step), seconds, on a quiet machine.
SAC_UPDATES_PER_S = {"cpu": (40.5, 54.9), "cuda": (216.0, 3311.0)}  # (eager, compiled)
COLD_WARMUP_SECONDS = {"cpu": 107.0, "cuda": 33.0}


def _break_even(device: str) -> int | None:
    """SAC updates whose saved time repays a cold warm-up (None: compiled measured slower),
    counting none of the compiled model fit's own saving."""
    eager, compiled = SAC_UPDATES_PER_S[device]
    saved = 1 / eager - 1 / compiled
    return math.ceil(COLD_WARMUP_SECONDS[device] / saved) if saved > 0 else None


# compile=auto compiles a run with at least this many SAC updates (CPU ~16 500, CUDA ~7 600).
AUTO_COMPILE_UPDATES = {d: _break_even(d) for d in SAC_UPDATES_PER_S}
# max_minutes bounds the whole process, warm-up included: compile=auto compiles only when the
# budget holds BUDGET_WARMUPS cold warm-ups (compiling repays itself over a run several times
# longer than its warm-up).
BUDGET_WARMUPS = 5


def resolve_amp(amp: str, device: torch.device, component: str = "sac") -> str:
    """``auto`` -> :data:`AUTO_AMP` for the device and component (``sac`` | ``model``);
    bf16 only where the GPU supports it."""
    if amp != "auto":
        return amp
    chosen = AUTO_AMP.get(device.type, AUTO_AMP["cpu"])[component]
    if chosen == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "off"
    return chosen


@dataclass(frozen=True)
class CompileChoice:
    on: bool  # torch.compile the SAC update and the model-fit step
    graphs: bool  # and capture them as CUDA graphs
    why: str  # one line for the start block


def resolve_compile(
    cfg: Config, device: torch.device, world: int, amp: str, kept: bool | None = None
) -> CompileChoice:
    """``compile``: true | false | auto (on from :data:`AUTO_COMPILE_UPDATES` SAC updates;
    a resume keeps the choice its run made on this kind of device, ``kept``: compiled and
    eager steps round apart, and a resume is to equal the run uninterrupted). CUDA graphs go
    with compiling on CUDA, except under torchrun (the gradient all-reduce stays outside
    graphs) and amp=fp16 (GradScaler reads its scale on the host)."""
    if cfg.compile == "false":
        return CompileChoice(False, False, "off (compile=false)")
    if cfg.compile == "auto" and kept is not None:
        why = f"{'on' if kept else 'off'} (auto: as the run chose before this resume)"
        return _with_graphs(kept, why, device, world, amp)
    updates = sac_updates(cfg)
    short = short_budget(cfg, device)
    if cfg.compile == "auto":
        kind = device.type if device.type in AUTO_COMPILE_UPDATES else "cpu"
        need, (eager, compiled) = AUTO_COMPILE_UPDATES[kind], SAC_UPDATES_PER_S[kind]
        gain = f"{compiled / eager:.2f}x eager measured on {kind}"
        if need is None:
            return CompileChoice(False, False, f"off (auto: the compiled SAC update, {gain})")
        if updates < need:
            return CompileChoice(
                False, False, f"off (auto: {updates:,} SAC updates < {need:,} that repay a "
                f"cold warm-up of ~{COLD_WARMUP_SECONDS[kind]:.0f} s at {gain})"
            )  # fmt: skip
        if short:
            return CompileChoice(False, False, f"off (auto: {short})")
        why = f"on (auto: {updates:,} SAC updates >= {need:,}; compiled {gain})"
    else:
        why = "on (compile=true" + (f"; {short}: the warm-up counts into it)" if short else ")")
    return _with_graphs(True, why, device, world, amp)


def _with_graphs(on: bool, why: str, device: torch.device, world: int, amp: str) -> CompileChoice:
    """Compiling (``on``) and, on CUDA, the CUDA graphs that go with it where they can."""
    if not on:
        return CompileChoice(False, False, why)
    graphs = device.type == "cuda" and world == 1 and amp != "fp16"
    if device.type == "cuda":
        why += ", CUDA graphs" if graphs else ", no CUDA graphs (torchrun or amp=fp16)"
    return CompileChoice(True, graphs, why)


def short_budget(cfg: Config, device: torch.device) -> str | None:
    """Why ``max_minutes`` is too short for compiling to pay (None: no limit, or long enough)."""
    cold = COLD_WARMUP_SECONDS.get(device.type, COLD_WARMUP_SECONDS["cpu"])
    if cfg.max_minutes is None or 60 * cfg.max_minutes >= BUDGET_WARMUPS * cold:
        return None
    return (
        f"max_minutes={cfg.max_minutes:g} is under {BUDGET_WARMUPS} compile warm-ups with an "
        f"empty compile cache (~{cold:.0f} s each on {device.type})"
    )


def resolve_speed(cfg: Config, device: torch.device, world: int, kept: bool | None = None) -> Speed:
    """Every speed setting of a run as one value: amp per component, compile, CUDA graphs and
    TF32 (``tf32`` acts on CUDA only); ``kept``: a resumed run's compile choice."""
    sac_amp = resolve_amp(cfg.amp, device, "sac")
    choice = resolve_compile(cfg, device, world, sac_amp, kept)
    return Speed(
        sac_amp=sac_amp,
        model_amp=resolve_amp(cfg.amp, device, "model"),
        compile=choice.on,
        graphs=choice.graphs,
        tf32=cfg.tf32 and device.type == "cuda",
        why=choice.why,
    )
