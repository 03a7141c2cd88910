"""One process per run folder: ``<run>/.lock`` is held (``flock``) while a run writes there.

A second run pointed at the same folder (``hydra.run.dir`` reused by mistake while the first
is running, or a resume of a run that is still going) would interleave its lines, checkpoints
and TensorBoard events with the first one's. It stops instead, before writing anything. The
operating system releases the lock when the holder exits, even after ``kill -9``.
"""

from __future__ import annotations

import fcntl
import os
from typing import IO

_held: dict[str, IO[str]] = {}  # real path of the run folder -> its open lock file


class RunFolderBusy(RuntimeError):
    """Another live process holds the run folder."""


def acquire(run_dir: str) -> None:
    """Hold ``run_dir``'s lock (creating the folder); a no-op if this process holds it."""
    key = os.path.realpath(run_dir)
    if key in _held:
        return
    os.makedirs(run_dir, exist_ok=True)
    f = open(os.path.join(run_dir, ".lock"), "a+", encoding="ascii")  # noqa: SIM115 (held)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RunFolderBusy(
            f"run folder {run_dir!r} is in use by a running FlowMBPO process ({holder}); "
            "wait for it to finish or stop it, or choose another folder (hydra.run.dir=...)"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    _held[key] = f


def release(run_dir: str) -> None:
    f = _held.pop(os.path.realpath(run_dir), None)
    if f is not None:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()
