"""Ctrl-C during training, or the end of its wall-clock allowance (``max_minutes``): finish
the current step (or model-fit epoch), checkpoint, then stop.

A KeyboardInterrupt raised at an arbitrary line could land between two writes of one update
(a buffer half written, an optimizer half stepped); the checkpoint taken then would hold a
state no run ever had. The first SIGINT only sets a flag that the loop reads after each step;
a second one stops at once (nothing saved beyond the last checkpoint). ``max_minutes`` sets
the same flag once that much wall-clock time has passed since the request was made.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from mbrl.runtime import distributed


class StopRequest:
    """``with StopRequest() as stop: ... if stop.requested: ...`` (main thread only; a no-op
    elsewhere, e.g. under a launcher that runs jobs in threads)."""

    def __init__(
        self,
        waiting_for: Callable[[], str] = lambda: "the current step",
        max_minutes: float | None = None,
    ) -> None:
        """``waiting_for()``: what the loop finishes before it stops (for the message);
        ``max_minutes``: stop as if Ctrl-C had been pressed once this much time has passed."""
        self.requested, self.waiting_for = False, waiting_for
        self.why = "Ctrl-C"  # what requested the stop
        self.max_minutes = max_minutes
        self._deadline = None if max_minutes is None else time.monotonic() + 60 * max_minutes
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def agreed(self) -> bool:
        """Whether to stop now: requested here (Ctrl-C, or ``max_minutes`` passed), or on any
        rank of a run on several processes (all ranks stop after the same step)."""
        if not self.requested and self._deadline is not None and time.monotonic() >= self._deadline:
            self.requested, self.why = True, f"max_minutes={self.max_minutes:g} reached"
            self._announce()
        return distributed.any_flag(self.requested)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:  # the second Ctrl-C
            raise KeyboardInterrupt
        self.requested, self.why = True, "Ctrl-C"
        self._announce()

    def _announce(self) -> None:
        print(
            f"\n{self.why}: stopping after {self.waiting_for()}, then writing ckpt/last.pt, from "
            "which resume= continues exactly (Ctrl-C again to quit at once, without it)",
            file=sys.stderr,
            flush=True,
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
