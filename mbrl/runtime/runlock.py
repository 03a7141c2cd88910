"""One process per run folder: ``<run>/.lock`` is held (``flock``) while a run writes there,
so a second run pointed at it stops before writing anything instead of interleaving its lines,
checkpoints and TensorBoard events with the first one's. docs/failures.md says when the lock
is let go (by the operating system even after ``kill -9``; the file removed otherwise)."""

from __future__ import annotations

import atexit
import contextlib
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
    path = os.path.join(run_dir, ".lock")
    while True:
        f = open(path, "a+", encoding="ascii")  # noqa: SIM115 (held)
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
        if _same_file(f, path):
            break
        f.close()  # locked a file its holder removed as it let go: take the new one
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}\n")
    f.flush()
    _held[key] = f


def held_by_another(run_dir: str) -> bool:
    """Whether another process on this machine holds ``run_dir``'s lock: the pid its lock
    file names holds a flock on that file (``/proc/locks``; where that cannot be read, the
    pid alone is alive). Taking the lock to see, even shared, could refuse a run that
    starts at that moment."""
    path = os.path.join(run_dir, ".lock")
    try:
        with open(path, encoding="ascii") as f:
            pid = int(f.read().split()[1])
        inode = os.stat(path).st_ino
    except (OSError, ValueError, IndexError):  # (no lock file: no run writes there)
        return False
    if pid == os.getpid():
        return False
    try:
        with open("/proc/locks", encoding="ascii") as f:
            locks = [line.split() for line in f]
    except OSError:
        return _alive(pid)
    # "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF": the pid, then device:inode
    return any(
        len(w) > 5 and w[1] == "FLOCK" and w[4] == str(pid) and w[5].endswith(f":{inode}")
        for w in locks
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # (signal 0: whether the process exists)
    except ProcessLookupError:
        return False  # (killed: its lock file stayed behind)
    except PermissionError:
        return True
    return True


def _same_file(f: IO[str], path: str) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        return False


def release(run_dir: str) -> None:
    """Let go of ``run_dir``'s lock and remove the file (removed first: a process that opened
    it meanwhile then sees that it locked a removed file, and opens the new one)."""
    f = _held.pop(os.path.realpath(run_dir), None)
    if f is None:
        return
    with contextlib.suppress(OSError):  # (gone, or the folder moved: let go all the same)
        os.remove(os.path.join(run_dir, ".lock"))
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()


def release_all() -> None:
    """Every lock this process holds (at exit, and before an immediate quit)."""
    for key in list(_held):
        release(key)


atexit.register(release_all)
