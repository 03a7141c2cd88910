"""How long this process stood stopped (Ctrl-Z in a terminal, ``kill -STOP``, a debugger):
the run's own timers leave it out, so that phase times, env steps/s, fit seconds and the
time-left estimate say what the run took, not how long it was suspended.

A stopped process runs none of its threads while the monotonic clock goes on. A watcher thread
wakes every :data:`TICK` seconds and notes each wake-up more than :data:`GAP` seconds late. A
late wake-up is a pause only if the process was continued (SIGCONT, which ends every stop) as it
ended: a late wake-up can also come from a long call that holds the GIL (reading a large
checkpoint), and that time the run did spend. The SIGCONT handler runs in the main thread at its
next bytecode, before the main thread reads this clock again, so every reading after a pause
leaves it out. Outside the main thread no handler can be set: pauses are then counted as time.

``max_minutes`` is a wall-clock budget (a GPU slot, a queue's limit): it counts a pause.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType

TICK = 0.25  # seconds between the watcher's wake-ups
GAP = 2.0  # a wake-up this much later than due may be a pause
NEAR = 1.0  # seconds between a late wake-up and the SIGCONT that makes it a pause, at most


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0.0  # seconds stopped, counted so far
        self._late: list[tuple[float, float]] = []  # (seconds, when seen): late, not yet counted
        self._due = time.perf_counter() + TICK
        threading.Thread(target=self._run, name="pause watcher", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(max(self._due - time.perf_counter(), 0.0))
            with self._lock:
                now = time.perf_counter()
                if now - self._due > GAP:
                    self._late = [*self._late[-3:], (now - self._due, now)]
                self._due = now + TICK

    def continued(self) -> None:
        """SIGCONT: the late wake-ups just seen, or the one under way, were a pause."""
        with self._lock:
            now = time.perf_counter()
            late = [seconds for seconds, seen in self._late if now - seen <= NEAR]
            if now - self._due > GAP:  # (the watcher has not woken since: it will see it)
                late.append(now - self._due)
                self._due = now + TICK
            self.total += sum(late)
            self._late = []


_watcher: _Watcher | None = None
_start = threading.Lock()


def _continued(signum: int, frame: FrameType | None) -> None:
    if _watcher is not None:
        _watcher.continued()


def paused() -> float:
    """Seconds this process has stood stopped since the first call (which starts the watcher
    and, in the main thread, takes SIGCONT: a run's timers call it as they are made)."""
    global _watcher
    if _watcher is None:
        with _start:
            if _watcher is None:
                _watcher = _Watcher()
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGCONT, _continued)
    return _watcher.total


def clock() -> float:
    """``time.perf_counter()`` less the time this process stood stopped: the difference of two
    readings is the time the process ran (or waited on the GPU, the disk, ...) meanwhile."""
    return time.perf_counter() - paused()
