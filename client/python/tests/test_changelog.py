"""Issue 14, defect 9: a flapping sidecar cannot flood the log. At most one
line per 10 s per kind, with the count of the changes held back; the state
they ended in is logged when the 10 s are up. On a hand-moved clock and
timer: nothing sleeps."""

from __future__ import annotations

import logging
from typing import Callable

import pytest

from breakerd._changelog import ChangeLog
from breakerd._presence import SidecarPresence


class ManualTime:
    """A clock that moves only when told, and the timers due on it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        assert delay >= 0
        self.timers.append((self.now + delay, fn))

    def advance_to(self, when: float) -> None:
        """Move to ``when``, running the timers due by then, in order."""
        while True:
            due = sorted((t for t in self.timers if t[0] <= when), key=lambda t: t[0])
            if not due:
                break
            at, fn = due[0]
            self.timers.remove(due[0])
            self.now = max(self.now, at)
            fn()
        self.now = when


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Callable[[], list[tuple[float, str]]]:
    caplog.set_level(logging.INFO, logger="breakerd")
    return lambda: [(r.created, r.getMessage()) for r in caplog.records if r.name == "breakerd"]


def _flip(log: ChangeLog, down: bool) -> None:
    if down:
        log.change("unreachable", logging.WARNING, "breakerd at %s cannot answer", "x")
    else:
        log.change("back", logging.INFO, "breakerd at %s answers again", "x")


def test_one_outage_logs_both_lines_at_once(
    lines: Callable[[], list[tuple[float, str]]],
) -> None:
    t = ManualTime()
    log = ChangeLog(10.0, clock=t.clock, schedule=t.schedule)
    _flip(log, True)
    t.advance_to(t.now + 0.5)
    _flip(log, False)
    assert [m for _, m in lines()] == [
        "breakerd at x cannot answer",
        "breakerd at x answers again",
    ]
    assert t.timers == []


def test_flapping_logs_one_line_per_kind_per_interval_with_the_count(
    lines: Callable[[], list[tuple[float, str]]],
) -> None:
    t = ManualTime()
    log = ChangeLog(10.0, clock=t.clock, schedule=t.schedule)
    logged_at: list[tuple[float, str]] = []
    start = t.now
    changes = 244
    for i in range(changes):  # 244 changes in 3 s, ending "back"
        t.advance_to(start + 3.0 * i / changes)
        before = len(lines())
        _flip(log, i % 2 == 0)
        if len(lines()) > before:
            logged_at.append((t.now, lines()[-1][1]))
    assert [m for _, m in logged_at] == [
        "breakerd at x cannot answer",
        "breakerd at x answers again",
    ]

    # When the 10 s are up: one line, the final state and the count.
    count = len(lines())
    t.advance_to(start + 30)
    new = [m for _, m in lines()[count:]]
    assert new == ["breakerd at x answers again (242 changes not logged since the previous line)"]
    assert t.timers == []


def test_lines_of_one_kind_are_at_least_the_interval_apart() -> None:
    t = ManualTime()
    written: list[tuple[float, str]] = []
    log = ChangeLog(10.0, clock=t.clock, schedule=t.schedule)

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kind = "unreachable" if "cannot" in record.getMessage() else "back"
            written.append((t.now, kind))

    handler = Capture()
    logger = logging.getLogger("breakerd")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        start = t.now
        for i in range(600):  # a flip every 0.1 s for a minute
            t.advance_to(start + 0.1 * i)
            _flip(log, i % 2 == 0)
        t.advance_to(start + 120)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    for kind in ("unreachable", "back"):
        times = [at for at, k in written if k == kind]
        assert all(b - a >= 10.0 for a, b in zip(times, times[1:])), (kind, times)
    assert len(written) <= 2 * (60 / 10 + 2)
    assert written[-1][1] == "back"  # the last change: i = 599 is odd


# conformance: log-flap
def test_a_sidecar_flapping_a_hundred_times_in_a_second_logs_the_first_change_and_the_count(
    lines: Callable[[], list[tuple[float, str]]],
) -> None:
    t = ManualTime()
    presence = SidecarPresence(
        lambda: False,
        600.0,  # no probe runs during the test: each "back" is the Watch's
        target="x",
        fail_mode="open",
        changes=ChangeLog(clock=t.clock, schedule=t.schedule),
    )
    start = t.now
    flips = 100
    seen: list[bool] = []
    try:
        for i in range(flips):  # away and back 100 times within 1 s
            t.advance_to(start + i / flips)
            presence.failed("DEADLINE_EXCEEDED", away=True)
            seen.append(presence.away)
            t.advance_to(start + (i + 0.5) / flips)
            presence.back()
            seen.append(presence.away)
            if i == 0:  # the first change (and the first of the other kind) at once
                assert [m for _, m in lines()] == [
                    "breakerd at x cannot answer (DEADLINE_EXCEEDED): failing open with no "
                    "RPC until it answers a health check",
                    "breakerd at x answers again",
                ]
    finally:
        presence.close(timeout=2.0)
    assert seen == [True, False] * flips
    # The flips ended "back": its kind's 10 s run from its first line.
    first_back = start + 0.5 / flips
    t.advance_to(first_back + 9.999)
    assert len(lines()) == 2, "a flip within the 10 s was logged, not counted"

    t.advance_to(first_back + 10)  # the 10 s are up: the state it ended in, and the count
    assert [m for _, m in lines()[2:]] == [
        f"breakerd at x answers again ({2 * flips - 2} changes not logged since the previous line)"
    ]
    t.advance_to(start + 60)
    assert len(lines()) == 3
    assert t.timers == []
