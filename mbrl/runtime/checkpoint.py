"""Checkpoint files (what each holds: docs/failures.md): atomic writes (temp file + rename),
clear errors on bad files; files that hold the same bytes are hard links, so each state is
serialised once."""

from __future__ import annotations

import contextlib
import os
import shutil
import zipfile
from typing import IO, Any

import torch

# 2: one SAC optimizer, the acting policy's state. 3: buffers stored oldest row first with
# the model pool's window; the Gaussian ensemble's shared log-variance bounds (MBPO's).
# 4: the loop's side under "algorithm" (MBPO or model-free), config key algorithm.init_steps.
# 5: every env copy's state (env.num_envs), the world size and each rank's own part.
FORMAT_VERSION = 5


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: missing, unreadable, or from another run setup."""


def _open(path: str) -> IO[bytes]:
    """Where checkpoint bytes go (a seam for tests that make the disk run full)."""
    return open(path, "wb")


class _Recording:
    """What torch.save writes to: a binary file's ``write`` and ``flush``, remembering the
    OSError a write raised (disk full, quota, ...)."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as err:
            self.error = self.error or err
            raise

    def flush(self) -> None:
        self.f.flush()


def save_atomic(state: dict[str, Any], path: str) -> None:
    """Write ``state`` to ``path`` all or nothing: into a temporary file, then renamed over
    ``path``. If the write fails (disk full, ...), the temporary file is removed, ``path``
    keeps its previous contents, and :class:`CheckpointError` says so."""
    tmp = f"{path}.tmp{os.getpid()}"
    f = _open(tmp)
    sink = _Recording(f)
    try:
        with f:
            torch.save(state, sink)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them current
    except (OSError, RuntimeError) as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        cause = sink.error or err  # torch re-raises a failed write as its own, vaguer error
        raise CheckpointError(
            f"could not write checkpoint {path!r}: {cause}. The previous "
            f"{os.path.basename(path)} is intact; free some disk space and resume the run from it"
        ) from cause
    os.replace(tmp, path)  # atomic on POSIX: a reader sees the old or the new file, never half


def link_or_copy(src: str, dst: str) -> None:
    """Make ``dst`` hold ``src``'s bytes, replacing it atomically."""
    tmp = f"{dst}.tmp{os.getpid()}"
    try:
        os.link(src, tmp)
    except OSError:  # file systems without hard links
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


_summed: set[tuple[str, int, int]] = set()  # files checked whole in this process, unchanged


def _check_sums(path: str) -> None:
    """Raise :class:`CheckpointError` if a record of the checkpoint's zip does not match the
    CRC-32 torch.save stored for it: bytes changed after the write (a disk or copy error),
    which torch.load does not check. Reads the file once per process (~0.15 s per 64 MB)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if key in _summed:
        return
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):  # (torch.load says what)
        return
    if bad is not None:
        raise CheckpointError(
            f"checkpoint {path!r} is corrupt: the bytes of its record {bad!r} do not match "
            "the checksum written with them (changed on disk or in a copy since); use a good "
            "copy, or copy another checkpoint that holds the buffers (ckpt_best.pt) over it"
        )
    _summed.add(key)


def load(
    path: str, env_name: str | None = None, mmap: bool = False, sums: bool = True
) -> dict[str, Any]:
    """Read a checkpoint (to the CPU); with ``env_name`` also check it was written for that env.

    ``mmap=True`` maps tensor storages instead of reading them; ``sums=False`` leaves out the
    check of the records' CRC-32s (which reads the whole file, once per process): together, a
    look at the step or the config that reads little more than the pickle.
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist")
    if os.path.getsize(path) == 0:  # (torch's own message speaks of its zip format)
        raise CheckpointError(f"checkpoint {path!r} is empty (0 bytes): a write cut short")
    if sums:
        _check_sums(path)
    try:
        # weights_only=False: the file holds RNG states and env physics, not just tensors.
        # Only load checkpoints you wrote yourself.
        state = torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    except Exception as err:  # torch raises several types for truncated / foreign files
        raise CheckpointError(
            f"checkpoint {path!r} is corrupt or not a FlowMBPO checkpoint: {err}"
        ) from None
    if not isinstance(state, dict) or "format" not in state:
        raise CheckpointError(
            f"checkpoint {path!r} is not a FlowMBPO checkpoint (format {FORMAT_VERSION})"
        )
    if state["format"] != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path!r} has format {state['format']!r}; this FlowMBPO reads format "
            f"{FORMAT_VERSION} (5: env copies and processes are saved): retrain, or "
            "use the FlowMBPO version that wrote it"
        )
    if env_name is not None and state["env"] != env_name:
        raise CheckpointError(
            f"checkpoint {path!r} was written for env {state['env']!r}, not {env_name!r}"
        )
    return state


def compiled_before(run_dir: str, device: torch.device) -> bool | None:
    """Whether the run in ``run_dir`` compiled when its ``ckpt/last.pt`` was written, on a
    device of this kind (None: another kind, or a checkpoint from before it was saved)."""
    saved = load(os.path.join(run_dir, "ckpt", "last.pt"), mmap=True, sums=False).get("compiled")
    return bool(saved["on"]) if saved and saved["device"] == device.type else None


def check_layout(state: dict[str, Any], run_dir: str, world: int, num_envs: int) -> None:
    """A run continues on as many processes and env copies as it ran on: each process holds
    its own env copies and buffers, and the checkpoint holds each copy's exact state."""
    if "buffers" not in state:
        raise CheckpointError(
            f"resume={run_dir!r}: its ckpt/last.pt holds no buffers (a snapshot written with "
            "checkpoint.buffer_in_snapshots=false: weights for evaluation, not a run to "
            "continue); put the run's own last.pt or ckpt_best.pt back, or keep buffers in "
            "snapshots with checkpoint.buffer_in_snapshots=true"
        )
    saved = state.get("world_size", 1)
    if saved != world:
        how = "without torchrun" if saved == 1 else f"with torchrun --nproc_per_node={saved}"
        raise CheckpointError(
            f"resume={run_dir!r}: the run ran on {saved} process{'es' if saved > 1 else ''} "
            f"and this start has {world}; each process holds its own envs and buffers, so "
            f"resume it {how}"
        )
    copies = len(state["collector"]["envs"])
    if copies != num_envs:
        raise CheckpointError(
            f"resume={run_dir!r}: the run stepped env.num_envs={copies} env copies; it "
            f"continues only with env.num_envs={copies} (got {num_envs})"
        )


def without_buffers(state: dict[str, Any]) -> dict[str, Any]:
    """The state without the buffers (every rank's): a snapshot for evaluation and analysis."""
    slim = {k: v for k, v in state.items() if k != "buffers"}
    if "ranks" in slim:
        slim["ranks"] = [{k: v for k, v in r.items() if k != "buffers"} for r in slim["ranks"]]
    return slim


class CheckpointManager:
    """Writes ``last.pt`` / ``iteration_<N>.pt`` / ``ckpt_best.pt`` under ``<run>/ckpt``."""

    def __init__(self, run_dir: str, snapshots: bool, buffer_in_snapshots: bool) -> None:
        self.dir = os.path.join(run_dir, "ckpt")  # (made with the first checkpoint)
        names = os.listdir(self.dir) if os.path.isdir(self.dir) else []
        for name in names:  # half-written files of a process that was killed
            if ".pt.tmp" in name:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(self.dir, name))
        self.snapshots, self.buffer_in_snapshots = snapshots, buffer_in_snapshots
        self.last_path = os.path.join(self.dir, "last.pt")
        self.best_path = os.path.join(self.dir, "ckpt_best.pt")
        self.saved_step: int | None = None  # the env step last.pt holds (None: no last.pt yet)

    def save_last(self, state: dict[str, Any]) -> None:
        """Only ``last.pt`` (a stop between evaluations)."""
        os.makedirs(self.dir, exist_ok=True)
        save_atomic(state, self.last_path)
        self.saved_step = state["step"]

    def save(self, state: dict[str, Any], step: int, is_best: bool) -> None:
        self.save_last(state)
        if is_best:
            link_or_copy(self.last_path, self.best_path)
        if not self.snapshots:
            return
        snapshot = os.path.join(self.dir, f"iteration_{step}.pt")
        if self.buffer_in_snapshots:
            link_or_copy(self.last_path, snapshot)
        else:
            save_atomic(without_buffers(state), snapshot)
