"""How long this process stood stopped (Ctrl-Z in a terminal, ``kill -STOP``, a debugger):
the run's own timers leave it out, so that phase times, env steps/s, fit seconds and the
time-left estimate say what the run took, not how long it was suspended.

A stopped process runs none of its threads while the monotonic clock goes on. A watcher thread
wakes every :data:`TICK` seconds; a wake-up more than :data:`GAP` seconds late is a pause of that
length (:data:`GAP` is far above what scheduling or the GIL delays a thread: milliseconds on a
loaded machine). A clock read right after the process continues, before the watcher has woken,
counts the pause too: :func:`paused` looks at how late the watcher is.

``max_minutes`` is a wall-clock budget (a GPU slot, a queue's limit): it counts a pause.
"""

from __future__ import annotations

import threading
import time

TICK = 0.25  # seconds between the watcher's wake-ups
GAP = 2.0  # a wake-up this much later than due is a pause


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0.0  # seconds stopped, counted so far
        self._due = time.perf_counter() + TICK
        threading.Thread(target=self._run, name="pause watcher", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(max(self._due - time.perf_counter(), 0.0))
            with self._lock:
                now = time.perf_counter()
                late = now - self._due
                if late > GAP:
                    self._total += late
                self._due = now + TICK

    def paused(self) -> float:
        with self._lock:
            late = time.perf_counter() - self._due
            return self._total + (late if late > GAP else 0.0)


_watcher: _Watcher | None = None
_start = threading.Lock()


def paused() -> float:
    """Seconds this process has stood stopped since the first call (which starts the watcher:
    a run's timers call it as they are made)."""
    global _watcher
    if _watcher is None:
        with _start:
            if _watcher is None:
                _watcher = _Watcher()
    return _watcher.paused()


def clock() -> float:
    """``time.perf_counter()`` without the time this process stood stopped: differences of two
    readings are the time the process ran (or waited on the GPU, the disk, ...) meanwhile."""
    return time.perf_counter() - paused()
