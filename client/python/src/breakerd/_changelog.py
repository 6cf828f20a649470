"""Logging a condition's changes without flooding the log (client/README.md,
"Fail-open": at most one line per 10 s per kind, with the count of flips)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Optional, Tuple

_log = logging.getLogger("breakerd")

INTERVAL = 10.0
"""Seconds between two lines of one kind."""

Clock = Callable[[], float]
# schedule(delay, fn): call fn() once, about delay seconds from now.
Schedule = Callable[[float, Callable[[], None]], None]
_Line = Tuple[int, str, Tuple[Any, ...]]


def _timer(delay: float, fn: Callable[[], None]) -> None:
    timer = threading.Timer(delay, fn)
    timer.daemon = True
    timer.start()


class ChangeLog:
    """The log of one condition's changes (breakerd reachable or not;
    Reports accepted or not), each change of a *kind* ("unreachable",
    "back"); thread-safe.

    A change is logged at once unless a line of its kind was written less
    than ``interval`` seconds ago (so one outage logs both of its lines at
    once). A change sooner than that is counted, not logged, and once its
    kind's interval is up the state the held-back changes ended in is logged
    with their count: a flapping sidecar writes at most one line per kind
    per interval, however often it flips.
    """

    def __init__(
        self,
        interval: float = INTERVAL,
        *,
        clock: Clock = time.monotonic,
        schedule: Schedule = _timer,
    ) -> None:
        # Constant after construction.
        self._interval = interval
        self._clock = clock
        self._schedule = schedule
        # Guarded by _lock.
        self._lock = threading.Lock()
        self._last_line_at: dict[str, float] = {}  # kind -> when its last line was written
        self._latest: Optional[Tuple[str, _Line]] = None  # the last change held back
        self._held = 0  # changes held back since the last line
        self._flush_pending = False

    def change(self, kind: str, level: int, msg: str, *args: Any) -> None:
        """The condition changed to a state of ``kind``, described by ``msg % args``."""
        line: Optional[_Line] = None
        flush_in: Optional[float] = None
        with self._lock:
            wait = self._wait(kind)
            if wait <= 0 and not self._flush_pending:
                self._last_line_at[kind] = self._clock()
                line = (level, msg, args)
            else:
                self._held += 1
                self._latest = (kind, (level, msg, args))
                if not self._flush_pending:
                    self._flush_pending = True
                    flush_in = wait
        if line is not None:
            _log.log(line[0], line[1], *line[2])
        if flush_in is not None:
            self._schedule(flush_in, self._flush)

    def _wait(self, kind: str) -> float:
        """Seconds until a line of ``kind`` may be written. REQUIRES: _lock held."""
        last = self._last_line_at.get(kind)
        return 0.0 if last is None else last + self._interval - self._clock()

    def _flush(self) -> None:
        """An interval is up: log the state the held-back changes ended in
        (later, if its own kind's interval is not up yet)."""
        with self._lock:
            if self._latest is None:
                self._flush_pending = False
                return
            kind, (level, msg, args) = self._latest
            wait = self._wait(kind)
            if wait > 0:
                reschedule = True
            else:
                reschedule = False
                held, self._held = self._held, 0
                self._latest = None
                self._flush_pending = False
                self._last_line_at[kind] = self._clock()
        if reschedule:
            self._schedule(wait, self._flush)
            return
        _log.log(
            level,
            msg + " (%d change%s not logged since the previous line)",
            *args,
            held,
            "" if held == 1 else "s",
        )
