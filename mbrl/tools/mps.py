"""CUDA MPS (NVIDIA's Multi-Process Service) for ``scripts/seeds.py``'s runs: their kernels
run on one GPU at the same time instead of taking turns (docs/scaling.md: why, and what it
needs). seeds.py starts a control daemon of its own (the user's permissions, its own pipe and
log folders), gives its runs the two folders so that they join it, and quits it once they have
stopped. ``FLOWMBPO_MPS_CONTROL`` names another control command (a stand-in daemon, for the
tests on a CPU).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

CONTROL = "nvidia-cuda-mps-control"
CONTROL_ENV = "FLOWMBPO_MPS_CONTROL"
DRIVER_BIN = "/usr/local/nvidia/bin"  # where GPU containers put the driver's tools, off PATH
PIPE, LOG = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
MODES = ("auto", "on", "off")
TIMEOUT = 60.0  # seconds for the control command, and for the probe client to join
# One CUDA client: the daemon starts its server only when a client connects, so a server
# that cannot start (another user's, a GPU in exclusive mode) shows here, not in every run.
PROBE = "import torch; torch.ones(1, device='cuda').sum().item()"  # sync-ok: a child process


def find_tool(name: str) -> str | None:
    """A driver tool's path: on PATH, or in the driver's folder of GPU containers."""
    found = shutil.which(name)
    if found is None and os.access(os.path.join(DRIVER_BIN, name), os.X_OK):
        found = os.path.join(DRIVER_BIN, name)
    return found


def wanted(mode: str, device: str, procs: int) -> tuple[bool, str]:
    """Whether to start MPS for ``procs`` runs at a time on ``device``, and why, for the
    start line. ``on`` tries whatever the device (a failed start is one line)."""
    if mode not in MODES:
        raise ValueError(f"--mps {mode!r}: give one of {', '.join(MODES)}")
    if mode != "auto":
        return mode == "on", f"--mps {mode}"
    if device != "cuda":
        return False, f"--mps auto: the runs are on {device}"
    if procs < 2:
        return False, "--mps auto: one process at a time"
    return True, f"--mps auto: {procs} processes on one GPU"


@dataclass
class Mps:
    """A running control daemon: its command and its two folders."""

    control: str
    pipe: str
    log: str

    @property
    def env(self) -> dict[str, str]:
        """What a process needs in its environment to join this daemon."""
        return {PIPE: self.pipe, LOG: self.log}

    def stop(self) -> str:
        """Quit the daemon (after the runs have stopped: it waits for its clients), remove
        the pipe folder; returns one line saying how it went. Ctrl-C and SIGTERM are ignored
        meanwhile, so that an impatient second signal does not leave the daemon behind."""
        held = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            failure = _control(self, "quit\n")
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)
        if failure:  # (its pipe folder stays: the daemon is found by it)
            again = f"echo quit | {PIPE}={self.pipe} {self.control}"
            return f"MPS: its daemon did not quit ({failure}); to quit it: {again}"
        shutil.rmtree(self.pipe, ignore_errors=True)
        return "MPS: its daemon quit"


def start(log: str, probe: bool) -> tuple[Mps | None, str]:
    """Start a daemon whose log goes to ``log``; with ``probe``, check that a CUDA process
    can join it. Returns the daemon (None when it cannot start) and one line for the user."""
    control = os.environ.get(CONTROL_ENV) or find_tool(CONTROL)
    if control is None:
        why = f"{CONTROL} is neither on PATH nor in {DRIVER_BIN} ({CONTROL_ENV} may name it)"
        return None, f"MPS cannot start: {why}; the runs go on without it"
    os.makedirs(log, exist_ok=True)
    # A short folder of its own in /tmp: it holds the daemon's sockets (paths of at most
    # 108 bytes), and a daemon of another user or campaign keeps to its own.
    pipe = tempfile.mkdtemp(prefix="flowmbpo-mps-", dir="/tmp" if os.path.isdir("/tmp") else None)
    mps = Mps(control, pipe, os.path.abspath(log))
    failure = _control(mps, None)
    if failure is not None:
        shutil.rmtree(mps.pipe, ignore_errors=True)
        return None, f"MPS cannot start: {failure}; the runs go on without it"
    try:
        failure = _join(mps) if probe else None
    except KeyboardInterrupt:  # (Ctrl-C or SIGTERM while a CUDA process joins: no daemon left)
        mps.stop()
        raise
    if failure is not None:
        mps.stop()
        return None, f"MPS cannot start: {failure}; the runs go on without it"
    return mps, f"MPS: its daemon's pipes in {mps.pipe}, its log in {mps.log}"


def _control(mps: Mps, command: str | None) -> str | None:
    """Run the control command: ``-d`` (start the daemon) or with ``command`` on its stdin.
    Returns None, or what went wrong in a few words. Its output goes to a file, not a pipe:
    the daemon it forks may hold a pipe open for its whole life."""
    args = [mps.control] if command else [mps.control, "-d"]
    out = os.path.join(mps.log, "control-command.txt")
    try:
        with open(out, "ab") as f:
            done = subprocess.run(
                args, input=(command or "").encode(), stdout=f, stderr=subprocess.STDOUT,
                env={**os.environ, **mps.env}, timeout=TIMEOUT, start_new_session=True,
            )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{' '.join(args)}: {err}"
    if done.returncode != 0:
        with open(out, encoding="utf-8", errors="replace") as f:
            return f"{' '.join(args)} exited with {done.returncode}: {_last_line(f.read())}"
    return None


def _join(mps: Mps) -> str | None:
    """Whether a CUDA process joins the daemon (None), or why not."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True,
            env={**os.environ, **mps.env}, timeout=TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"a CUDA process did not join its daemon within {TIMEOUT:.0f} s"
    if done.returncode != 0:
        return f"a CUDA process could not join its daemon: {_last_line(done.stderr)}"
    return None


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]
