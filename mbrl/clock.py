"""How long this process stood stopped (Ctrl-Z in a terminal, ``kill -STOP``): the run's own
timers leave it out, so that phase times, env steps/s, fit seconds and the time-left estimate
say what the run took, not how long it was suspended.

A stopped process runs none of its threads and spends no CPU time, while the monotonic clock
goes on. A watcher thread wakes every :data:`TICK` seconds; between two readings (its own or a
timer's), wall-clock time beyond the CPU time the process spent meanwhile, if over :data:`GAP`
seconds, is a pause. The watcher keeps the readings at most a tick apart while the process
runs, so waiting (for the GPU, the disk, a sleep) never adds up to a pause; a long call that
holds the GIL delays the watcher too, but spends CPU time that whole while, so it is none
(torch.save and torch.load let the GIL go: measured late wake-ups of 10 ms). Taken for a pause
all the same: a call that holds the GIL while it waits, or while the machine is too loaded to
run it, for more than :data:`GAP` seconds in all.

``max_minutes`` is a wall-clock budget (a GPU slot, a queue's limit): it counts a pause.
"""

from __future__ import annotations

import threading
import time

TICK = 0.25  # seconds between the watcher's wake-ups
GAP = 2.0  # wall-clock seconds beyond the CPU time spent, at least, for a pause


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0.0  # seconds stopped so far
        self._last = (time.perf_counter(), time.process_time())  # the last reading
        threading.Thread(target=self._run, name="pause watcher", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            self.read()

    def read(self) -> float:
        """The seconds stopped so far, with those since the last reading."""
        with self._lock:
            now, cpu = time.perf_counter(), time.process_time()
            stood = (now - self._last[0]) - (cpu - self._last[1])
            if stood > GAP:
                self._total += stood
            self._last = (now, cpu)
            return self._total


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
    return _watcher.read()


def clock() -> float:
    """``time.perf_counter()`` less the time this process stood stopped: the difference of two
    readings is the time the process ran (or waited on the GPU, the disk, ...) meanwhile."""
    stopped = paused()
    return time.perf_counter() - stopped
