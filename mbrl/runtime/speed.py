"""How a run is made fast: ``amp=auto`` per component and ``compile=auto``, each decided from
the config and the device alone (so a resumed run decides as the original did, unless its own
``max_minutes`` is too short to compile in), with the measurements behind each rule in
docs/benchmarks.md."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mbrl.config import Config

# amp=auto, per component and device. CPUs: fp32 (bf16 autocast measured slower for SAC and
# for model fits on the CPUs benchmarked). CUDA: SAC's 256-wide layers at batch 256 are too
# small for bf16 to repay its casts, so fp32 (TF32 where allowed); the model's ensemble MLPs
# and the rollouts' 100 000-row batches run bf16 hidden layers (with tf32=true, SAC's fp32
# matmuls run on TF32). Measured on an H200 (docs/benchmarks.md, 2026-11-26): the graphed SAC
# block at bf16 ran 3,467 updates/s against 3,311 at fp32, 5 %: not worth bf16's rounding in
# the critic's targets. The model's bf16 has not been timed against fp32 on a GPU yet.
AUTO_AMP: dict[str, dict[str, str]] = {
    "cpu": {"sac": "off", "model": "off"},
    "cuda": {"sac": "off", "model": "bf16"},
}

# compile=auto compiles when a run has at least this many SAC updates: where the time saved
# per update repays the warm-up of compiling the SAC update and the flow's fit step with a cold
# inductor cache (docs/benchmarks.md: on the 2-core CPU ~48 s cold, ~9 s warm, against ~3 ms
# saved per update: ~15 000 updates). CUDA, measured on an H200 (docs/benchmarks.md,
# 2026-11-26): cold warm-ups of 9.6 s (SAC) and 23.2 s (the flow's fit) against 4.3 ms saved
# per update (eager 216 updates/s, compiled and graphed 3,311): ~7 600 updates, counting none
# of the ~25x faster flow fit's own saving.
AUTO_COMPILE_UPDATES = {"cpu": 20_000, "cuda": 8_000}
# The warm-up's compiles with an empty inductor cache, seconds (the SAC update and the flow's
# fit step). CPU: 76 s + 227 s on the 2-core CPU beside other jobs (README, 2026-11-27); CUDA:
# 9.6 s + 23.2 s on an H200 (docs/benchmarks.md, 2026-11-26). max_minutes bounds the whole
# process, warm-up included: compile=auto compiles only when the budget holds BUDGET_WARMUPS
# cold warm-ups (a compiled update repays its warm-up only over a run several times longer).
COLD_WARMUP_SECONDS = {"cpu": 304.0, "cuda": 33.0}
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


def sac_updates_of(cfg: Config) -> int:
    """SAC updates a whole run makes: G per env step after the initial random steps."""
    steps = max(cfg.total_steps - cfg.algorithm.init_steps, 0)
    return steps * cfg.algorithm.updates_per_step


@dataclass(frozen=True)
class CompileChoice:
    on: bool  # torch.compile the SAC update and the model-fit step
    graphs: bool  # and capture them as CUDA graphs
    why: str  # one line for the start block


def resolve_compile(cfg: Config, device: torch.device, world: int, amp: str) -> CompileChoice:
    """``compile``: true | false | auto (on from :data:`AUTO_COMPILE_UPDATES` SAC updates).
    CUDA graphs go with compiling on CUDA, except under torchrun (the gradient all-reduce
    stays outside graphs) and amp=fp16 (GradScaler reads its scale on the host)."""
    if cfg.compile == "false":
        return CompileChoice(False, False, "off (compile=false)")
    updates, short = sac_updates_of(cfg), short_budget(cfg, device)
    if cfg.compile == "auto":
        need = AUTO_COMPILE_UPDATES.get(device.type, AUTO_COMPILE_UPDATES["cpu"])
        if updates < need:
            return CompileChoice(False, False, f"off (auto: {updates:,} SAC updates < {need:,})")
        if short:
            return CompileChoice(False, False, f"off (auto: {short})")
        why = f"on (auto: {updates:,} SAC updates >= {need:,})"
    else:
        why = "on (compile=true" + (f"; {short}: the warm-up counts into it)" if short else ")")
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
