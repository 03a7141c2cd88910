"""Ctrl-C (and SIGTERM, likewise) at any moment of a run, answered in one line.

While the run starts (imports, config checks, building the run, the compile warm-up) there is
nothing a stop could complete, so Ctrl-C quits at once and says what the run folder holds. In
the loop the first Ctrl-C only sets a flag that the loop reads after each env step (or
model-fit epoch): a KeyboardInterrupt raised at an arbitrary line could land between two writes
of one update, and the checkpoint taken then would hold a state no run ever had. The run then
checkpoints and stops. A second Ctrl-C quits at once, without saving.

Quitting at once is ``os._exit`` after one line. An exception raised from a signal handler can
be swallowed (a weakref callback that runs then prints "Exception ignored" and the run goes on)
or end in a traceback through hydra and inductor; an immediate exit leaves on disk what
``kill -9`` leaves, which every file of the run folder is written to survive (checkpoints are
replaced atomically; docs/failures.md).

A terminal's Ctrl-C reaches the whole process group: the compiler's g++ and helper processes,
inductor's workers and async env workers too. One that died of it would print a traceback or
make a compile fail (the run would then go on eagerly). So while the run starts, SIGINT is
blocked in the main thread, and with it in every thread and process started meanwhile (a
signal mask is inherited, also across exec), and a watcher thread takes the signal instead.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import resource_tracker
from types import FrameType
from typing import Any

from mbrl.runtime import runlock

EXIT_CODE = 130  # as a shell reports a process ended by SIGINT
TERM, TERM_EXIT_CODE = "SIGTERM", 143  # what stopped a run on SIGTERM; its exit code, likewise
# A SIGINT this soon after a SIGTERM is the same stop asked twice, not a second Ctrl-C: a
# scheduler's SIGTERM reaches every process of a job, and scripts/seeds.py, stopped by it too,
# then asks each of its runs to stop with a SIGINT.
ECHO_SECONDS = 10.0
STARTING, RUNNING = "starting", "running"  # the moments a quit text is asked for

_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"

# moment -> the one line printed when Ctrl-C quits at once (the launcher and the trainer
# replace it as they learn the run folder and what it holds)
QuitText = Callable[[str], str]
BEFORE_THE_RUN = "stopped before the run started (Ctrl-C): nothing was saved"


class _Process:
    """This process's answer to SIGINT once :func:`install` made it ours."""

    def __init__(self) -> None:
        self.owned = False
        self.quit_text: QuitText = lambda moment: BEFORE_THE_RUN
        self.moment = STARTING  # until the loop begins (again, for a multirun's next job)
        self.stop: StopRequest | None = None  # the loop's, while it runs
        self.sender = ""  # who sent the SIGINT, when the watcher saw another process send it
        self._watcher: threading.Thread | None = None


_process = _Process()


def install() -> None:
    """``scripts/train.py``, first thing: from here on Ctrl-C is answered as this module says
    (main thread only; elsewhere, e.g. a launcher's job thread, Python's default stays)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _process.owned = True
    signal.signal(signal.SIGINT, _handle)
    signal.signal(signal.SIGTERM, _handle_term)
    # multiprocessing starts its resource tracker with SIGINT blocked and unblocks it after,
    # whatever the mask was: started now, before the block, it leaves the block alone later
    # (async env workers, forked by a forkserver spawned after it, inherit the block).
    # Its warning of semaphores left by a quick exit (async env workers' shared memory; it
    # removes them) is not the user's business: a Ctrl-C prints one line. Its -W options are
    # this interpreter's as it starts.
    sys.warnoptions.append(_TRACKER_QUIET)
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(_TRACKER_QUIET)
    starting()


def describe(quit_text: QuitText) -> None:
    """What the line printed on an immediate quit says from now on."""
    _process.quit_text = quit_text


def starting() -> None:
    """The run is starting (again, for the next job of a multirun): block SIGINT in the main
    thread, so that what it starts inherits the block, and watch for it in a thread."""
    _process.moment = STARTING
    if not _process.owned or _process._watcher is not None:
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    _process._watcher = threading.Thread(target=_watch, name="ctrl-c watcher", daemon=True)
    _process._watcher.start()


def _started() -> None:
    """The loop begins: the main thread takes SIGINT again (see :class:`StopRequest`)."""
    _process.moment = RUNNING
    watcher = _process._watcher
    if watcher is None:
        return
    watcher.join()
    _process._watcher = None
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _watch() -> None:
    while _process.moment == STARTING:  # (until the loop begins: _started joins this thread)
        info = signal.sigtimedwait({signal.SIGINT}, 0.1)
        if info is not None:
            _process.sender = sender(info.si_pid, info.si_code)
            quit_now()


FROM_A_PROCESS = (0, -1, -6)  # si_code of kill(), sigqueue(), tgkill(): si_pid is the sender
# si_code of a SIGINT no process sent: what sent it
_NOT_A_PROCESS = {-2: "a POSIX timer", -3: "a message queue", -4: "asynchronous I/O", -5: "SIGIO"}


def sender(pid: int, code: int) -> str:
    """Who sent a SIGINT, unless a terminal (the kernel sends its Ctrl-C) or the process that
    started the run (scripts/seeds.py stopping its runs, a launcher) did: "" for those, else
    the process and its command line (``si_code`` when the kernel names no process). A run
    stopped by a process its user did not expect (a ``kill`` from another shell, a
    supervisor) says which."""
    if code > 0 or (code in FROM_A_PROCESS and pid in (0, os.getppid(), os.getpid())):
        return ""  # (code > 0: the kernel)
    if code in _NOT_A_PROCESS:
        return f"SIGINT from {_NOT_A_PROCESS[code]}"
    # (any other negative code: a process sent its own siginfo, rt_sigqueueinfo; si_pid is
    # the pid it wrote there)
    odd = "" if code in FROM_A_PROCESS else f" (si_code {code})"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    if not command:
        return f"SIGINT from process {pid}: ended since (si_code {code})"
    return f"SIGINT from process {pid}: {command[:160]}{odd}"


def _handle(signum: int, frame: FrameType | None) -> None:
    stop = _process.stop
    if stop is not None and not stop.requested:
        stop.request()
        return
    if (
        stop is not None
        and stop.why == TERM
        and time.monotonic() - stop.requested_at < ECHO_SECONDS
    ):
        return  # (the same stop asked twice: see ECHO_SECONDS)
    quit_now()


def _handle_term(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (``kill``'s default, ``timeout``'s, a batch scheduler's at a job's time limit)
    is answered as Ctrl-C is: in the loop the first one stops it with its checkpoint, a second
    quits at once; while the run starts it quits at once."""
    stop = _process.stop
    if stop is not None and not stop.requested:
        stop.request(TERM)
        return
    _process.sender = _process.sender or TERM
    quit_now()


def quit_now() -> None:
    """One line, the run folder's lock let go, exit (nothing else runs: see the module)."""
    try:
        text = _process.quit_text(_process.moment)
    except Exception as err:  # the line must not turn into a traceback
        text = f"stopped (Ctrl-C) ({type(err).__name__} while describing the run folder)"
    if _process.sender:
        text = text.replace("(Ctrl-C)", f"({_process.sender})", 1)
    sys.stderr.write(f"\n{text}\n")
    sys.stderr.flush()
    runlock.release_all()
    _end_workers()
    os._exit(TERM_EXIT_CODE if _process.sender == TERM else EXIT_CODE)


def _end_workers() -> None:
    """End this process's multiprocessing children (async env workers) first: left behind,
    each finds its pipe closed once this process is gone and prints a traceback."""
    try:
        for child in multiprocessing.active_children():
            child.kill()
    except Exception:  # (the exit must happen whatever this meets)
        pass


def _other_rank() -> bool:
    """A rank other than the first of a run on several processes (torchrun's variables)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and os.environ.get("RANK", "0") != "0"


class StopRequest:
    """``with StopRequest(...) as stop: ... if stop.agreed(): ...`` around the loop.

    Under :func:`install` (``scripts/train.py``) a second Ctrl-C quits at once with one line;
    in a process of its own making (a notebook, a test), the handler is this object's for the
    block, and a second Ctrl-C raises KeyboardInterrupt, as Python does."""

    def __init__(self, waiting_for: Callable[[], str], max_minutes: float | None) -> None:
        """``waiting_for()``: what the loop finishes before it stops (for the message);
        ``max_minutes``: stop as if Ctrl-C had been pressed once this much time has passed."""
        self.requested, self.waiting_for = False, waiting_for
        self.why = "Ctrl-C"  # what requested the stop
        self.max_minutes = max_minutes
        self._deadline = None if max_minutes is None else time.monotonic() + 60 * max_minutes
        self._previous: Any = None
        self.requested_at = 0.0  # (time.monotonic() of the request)
        self._installed = False

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is not threading.main_thread():
            return self  # (no signal handler can be set here: the flag stays unset)
        if _process.owned:
            _process.stop = self
            _started()
        else:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def agreed(self) -> bool:
        """Whether to stop now: requested here (Ctrl-C, or ``max_minutes`` passed), or on any
        rank of a run on several processes (all ranks stop after the same step)."""
        from mbrl import collectives  # (torch: not needed to install the handler)

        timed = f"max_minutes={self.max_minutes or 0:g} reached"  # (only with a limit)
        if not self.requested and self._deadline is not None and time.monotonic() >= self._deadline:
            self.request(timed)
        # 0: go on, 1: Ctrl-C, 2: max_minutes, the largest over ranks (each rank's clock
        # starts when it gets here, so another rank may reach the common limit first)
        here = 0 if not self.requested else 2 if self.why == timed else 1
        agreed = -collectives.min_int(-here)
        if agreed and not self.requested:  # (another rank's: Ctrl-C or max_minutes there)
            self.request(timed if agreed == 2 else "a stop requested on another process of the run")
        return bool(agreed)

    def request(self, why: str = "Ctrl-C") -> None:
        self.requested, self.why = True, why
        self.requested_at = time.monotonic()
        if _other_rank():  # (torchrun: Ctrl-C reaches every rank; one says it)
            return
        again = "a second SIGTERM or Ctrl-C quits" if why == TERM else "Ctrl-C again to quit"
        print(
            f"\n{why}: stopping after {self.waiting_for()}, then writing ckpt/last.pt, from "
            f"which resume= continues exactly ({again} at once, without it)",
            file=sys.stderr,
            flush=True,
        )

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.request()

    def __exit__(self, *exc: object) -> None:
        if _process.stop is self:
            _process.stop = None
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
