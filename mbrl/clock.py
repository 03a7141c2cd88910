"""How long this process stood stopped (Ctrl-Z in a terminal, ``kill -STOP``): the run's own
timers leave it out, so that phase times, env steps/s, fit seconds and the time-left estimate
say what the run took, not how long it was suspended.

A stopped process runs none of its threads, and none waits to run, while the monotonic clock
goes on. A watcher thread wakes every :data:`TICK` seconds. When it wakes (or a timer reads
the clock) more than :data:`GAP` seconds after its last look, the wall-clock time since, beyond
what the busiest thread of the process ran or waited for a core meanwhile (Linux's per-thread
schedstat), is a pause. So waiting (for the GPU, the disk, a sleep) never adds up to one: the
watcher looks every tick then. A long call that holds the GIL delays the watcher too, but its
thread runs (or waits for a core, on a loaded machine) that whole while: no pause. Taken for a
pause all the same: a call that holds the GIL while it sleeps on I/O for over :data:`GAP`
seconds (torch.save and torch.load let the GIL go: measured late wake-ups of 10 ms). Without
schedstat (not Linux), the process's CPU time stands in for the busiest thread's.

``max_minutes`` is a wall-clock budget (a GPU slot, a queue's limit): it counts a pause.
"""

from __future__ import annotations

import os
import threading
import time

TICK = 0.25  # seconds between the watcher's wake-ups
GAP = 2.0  # seconds between two looks, at least, that may hold a pause


def _busy() -> dict[int, float]:
    """Seconds each thread of this process has run or waited for a core (Linux), or the
    process's CPU time as thread 0 where that cannot be read."""
    out: dict[int, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return {0: time.process_time()}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                ran, waited = f.read().split()[:2]
        except (OSError, ValueError):  # (a thread that has just ended)
            continue
        out[int(tid)] = (int(ran) + int(waited)) / 1e9
    return out or {0: time.process_time()}


class _Watcher:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0.0  # seconds stopped so far
        self._last, self._busy = time.perf_counter(), _busy()  # the last look
        threading.Thread(target=self._run, name="pause watcher", daemon=True).start()

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            with self._lock:
                self._look()

    def _look(self) -> None:
        # Reading schedstat lets the GIL go (file reads): another thread may run a long call
        # meanwhile. The gap is timed from the end of the last read to the start of this one,
        # so the run time read covers it whole: a call in a read is never taken for a pause.
        start, busy, end = time.perf_counter(), _busy(), time.perf_counter()
        if start - self._last > GAP:  # (a thread new since the last look counts from 0)
            stood = start - self._last - max(busy[t] - self._busy.get(t, 0.0) for t in busy)
            if stood > GAP:
                self.total += stood
        self._last, self._busy = end, busy

    def read(self) -> float:
        """The seconds stopped so far; if the watcher has not looked for over :data:`GAP`
        seconds (the process just continued, before the watcher ran), looks first."""
        if time.perf_counter() - self._last > GAP:
            with self._lock:
                if time.perf_counter() - self._last > GAP:
                    self._look()
        return self.total


_watcher: _Watcher | None = None
_start = threading.Lock()
_last_clock = float("-inf")  # clock()'s latest reading
_clock_lock = threading.Lock()


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
    readings is the time the process ran (or waited on the GPU, the disk, ...) meanwhile.

    Never earlier than a reading before it: a pause is measured a little long at times (a
    running thread's schedstat lags by up to a scheduler tick, ~1 ms), and the excess is then
    taken from the time that follows, not from time already counted, so that phases timed
    inside an interval never add up to more than the interval."""
    global _last_clock
    now = time.perf_counter() - paused()
    with _clock_lock:
        _last_clock = now = max(now, _last_clock)
    return now
