"""SIGTERM answered as Ctrl-C is, and a SIGINT right after a SIGTERM taken as the same stop
(a scheduler's SIGTERM reaches every process of a job; scripts/seeds.py, stopped by it too,
then sends each of its runs a SIGINT): the handlers called as the signals would call them,
with the immediate quit recorded instead of made."""

from __future__ import annotations

import signal
import time

import pytest

from mbrl.runtime import interrupt

ASKED = (
    "SIGTERM: stopping after the current step, then writing ckpt/last.pt, from which resume= "
    "continues exactly (a second SIGTERM or Ctrl-C quits at once, without it)"
)


def test_a_sigint_right_after_a_sigterm_is_the_same_stop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quits: list[str] = []
    monkeypatch.setattr(interrupt, "quit_now", lambda: quits.append(interrupt._process.sender))
    monkeypatch.setattr(interrupt._process, "sender", "")
    stop = interrupt.StopRequest(lambda: "the current step", None)
    monkeypatch.setattr(interrupt._process, "stop", stop)
    interrupt._handle_term(signal.SIGTERM, None)
    assert (stop.requested, stop.why, quits) == (True, "SIGTERM", [])
    assert ASKED in capsys.readouterr().err
    interrupt._handle(signal.SIGINT, None)  # (seeds.py's SIGINT, just after)
    assert quits == []
    monkeypatch.setattr(stop, "requested_at", time.monotonic() - interrupt.ECHO_SECONDS - 1)
    interrupt._handle(signal.SIGINT, None)  # (a Ctrl-C later on: quits at once)
    assert quits == [""]
    interrupt._handle_term(signal.SIGTERM, None)  # (a second SIGTERM, however soon)
    assert quits == ["", "SIGTERM"]


def test_a_second_ctrl_c_quits_at_once_however_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    quits: list[str] = []
    monkeypatch.setattr(interrupt, "quit_now", lambda: quits.append("quit"))
    stop = interrupt.StopRequest(lambda: "the current step", None)
    monkeypatch.setattr(interrupt._process, "stop", stop)
    interrupt._handle(signal.SIGINT, None)
    assert stop.requested and stop.why == "Ctrl-C" and quits == []
    interrupt._handle(signal.SIGINT, None)
    assert quits == ["quit"]
