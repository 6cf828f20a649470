"""The async path's send window on its own: at most 32 RPCs on the wire,
the rest wait in order (reports first), and a flush (breakerd away) answers
the waiting decisions at once. No breakerd, no threads, no sleep."""

from __future__ import annotations

from typing import Callable

import pytest

from breakerd._send_window import WINDOW, SendWindow


class Recorder:
    """Starts that record what ran; each sends an RPC unless told not to."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self, name: str, sends: bool = True) -> Callable[[bool], bool]:
        def run(waited: bool) -> bool:
            self.events.append(f"{name}{' (waited)' if waited else ''}")
            return sends

        return run

    def drop(self, name: str) -> Callable[[], None]:
        return lambda: self.events.append(f"{name} dropped")


def test_at_most_32_on_the_wire_and_the_rest_wait_in_order() -> None:
    assert WINDOW == 32
    window, rec = SendWindow(), Recorder()
    for i in range(WINDOW + 3):
        window.submit_decision(rec.start(f"d{i}"), rec.drop(f"d{i}"))
    assert rec.events == [f"d{i}" for i in range(WINDOW)]
    assert (window.in_flight, window.waiting) == (WINDOW, 3)

    window.done()  # one RPC finished: the first one waiting is sent
    assert rec.events[WINDOW:] == ["d32 (waited)"]
    assert (window.in_flight, window.waiting) == (WINDOW, 2)
    for _ in range(WINDOW + 3 - 1):
        window.done()
    assert rec.events[WINDOW:] == ["d32 (waited)", "d33 (waited)", "d34 (waited)"]
    assert (window.in_flight, window.waiting) == (0, 0)


def test_reports_waiting_go_before_decisions() -> None:
    window, rec = SendWindow(limit=1), Recorder()
    window.submit_decision(rec.start("d0"), rec.drop("d0"))
    window.submit_decision(rec.start("d1"), rec.drop("d1"))
    window.submit_report(rec.start("r0"), rec.drop("r0"))
    window.done()
    window.done()
    window.done()
    assert rec.events == ["d0", "r0 (waited)", "d1 (waited)"]
    assert window.in_flight == 0


def test_a_start_that_sends_nothing_frees_its_slot_at_once() -> None:
    window, rec = SendWindow(limit=1), Recorder()
    window.submit_decision(rec.start("d0"), rec.drop("d0"))
    window.submit_decision(rec.start("away1", sends=False), rec.drop("away1"))
    window.submit_decision(rec.start("away2", sends=False), rec.drop("away2"))
    window.submit_decision(rec.start("d3"), rec.drop("d3"))
    window.done()  # d0 done: away1 and away2 answer without RPC, d3 is sent
    assert rec.events == ["d0", "away1 (waited)", "away2 (waited)", "d3 (waited)"]
    assert (window.in_flight, window.waiting) == (1, 0)
    window.submit_decision(rec.start("away4", sends=False), rec.drop("away4"))
    window.done()  # d3 done: away4 answers without RPC, nothing left on the wire
    assert rec.events[-1] == "away4 (waited)"
    assert (window.in_flight, window.waiting) == (0, 0)


def test_flush_answers_everything_waiting_but_the_reports_kept() -> None:
    window, rec = SendWindow(limit=2), Recorder()
    window.submit_decision(rec.start("d0"), rec.drop("d0"))
    window.submit_report(rec.start("r0"), rec.drop("r0"))
    window.submit_decision(rec.start("d1"), rec.drop("d1"))
    window.submit_report(rec.start("kept"), None)  # a late permit going back
    window.submit_report(rec.start("r1"), rec.drop("r1"))
    window.submit_decision(rec.start("d2"), rec.drop("d2"))
    window.flush()  # breakerd away: nobody waits for it
    assert rec.events == ["d0", "r0", "r1 dropped", "d1 dropped", "d2 dropped"]
    assert (window.in_flight, window.waiting) == (2, 1)
    window.done()
    assert rec.events[-1] == "kept (waited)"
    window.done()
    window.done()
    assert window.in_flight == 0


def test_a_start_that_raises_does_not_leak_its_slot(caplog: pytest.LogCaptureFixture) -> None:
    window, rec = SendWindow(limit=1), Recorder()

    def broken(waited: bool) -> bool:
        raise RuntimeError("bug")

    window.submit_report(broken, None)
    assert window.in_flight == 0
    window.submit_decision(rec.start("d0"), rec.drop("d0"))
    assert rec.events == ["d0"]
    assert "starting an RPC failed" in caplog.text


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SendWindow(limit=0)
