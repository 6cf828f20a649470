"""At most 32 RPCs of the async path on the wire (client/README.md,
"Fail-open"). Each RPC's deadline runs from when it is started: a burst of
a thousand tasks that started every RPC at once would have them wait behind
one another (in breakerd, on the connection, in gRPC's one completion
thread) and fail open while breakerd is healthy. Waiting for a slot, they
wait before their deadline starts."""

from __future__ import annotations

import collections
import logging
import threading
from typing import Callable, Optional

_log = logging.getLogger("breakerd")

WINDOW = 32
"""RPCs of the async path (Acquire, AcquireFirst, Report) on the wire at once."""

Start = Callable[[bool], bool]
"""``start(waited)``: sends one RPC, or answers without one. ``waited`` says
that it waited for a slot (so what it checked before may have changed:
breakerd may be away now). Returns True if it sent an RPC, which then holds
its slot until :meth:`SendWindow.done`; False if it sent none."""

Drop = Callable[[], None]
"""Answers a decision or report waiting for a slot without an RPC (breakerd
is away)."""


class SendWindow:
    """Lets at most ``limit`` RPCs be on the wire; the starts beyond wait, in
    order, reports before decisions (a report ends work already begun and
    returns a permit), and each runs when a slot frees, so its RPC's
    deadline runs from when it is sent, not from when it was asked for.
    Thread-safe; a start or drop runs in the thread that submits it, frees
    a slot (gRPC's completion thread) or flushes the window, never under
    the window's lock."""

    def __init__(self, limit: int = WINDOW) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        # Constant after construction.
        self._limit = limit
        # Guarded by _lock.
        self._lock = threading.Lock()
        self._in_flight = 0  # slots held: RPCs sent and not done, or starts running
        self._reports: collections.deque[tuple[Start, Optional[Drop]]] = collections.deque()
        self._decisions: collections.deque[tuple[Start, Drop]] = collections.deque()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._reports) + len(self._decisions)

    def submit_report(self, start: Start, drop: Optional[Drop]) -> None:
        """Runs ``start(False)`` now if a slot is free, else ``start(True)``
        once one is, before any decision waiting, or ``drop()`` if the
        window is flushed first (None: kept, sent however long it waits)."""
        with self._lock:
            if self._in_flight >= self._limit:
                self._reports.append((start, drop))
                return
            self._in_flight += 1
        self._run(start, False)

    def submit_decision(self, start: Start, drop: Drop) -> None:
        """Runs ``start(False)`` now if a slot is free, else ``start(True)``
        once one is, or ``drop()`` if the window is flushed first."""
        with self._lock:
            if self._in_flight >= self._limit:
                self._decisions.append((start, drop))
                return
            self._in_flight += 1
        self._run(start, False)

    def done(self) -> None:
        """An RPC sent by a start finished: its slot goes to the next start
        waiting (and to the one after it, while starts send nothing)."""
        while True:
            with self._lock:
                if self._reports:
                    start = self._reports.popleft()[0]
                elif self._decisions:
                    start = self._decisions.popleft()[0]
                else:
                    self._in_flight -= 1
                    return
            if _run(start, True):
                return

    def flush(self) -> None:
        """breakerd was marked away: every decision and report waiting is
        dropped (answered at once, with no RPC: the client holds such a
        report until breakerd is back), but the reports kept."""
        with self._lock:
            dropped = [drop for _, drop in self._reports if drop is not None]
            dropped += [drop for _, drop in self._decisions]
            self._reports = collections.deque(r for r in self._reports if r[1] is None)
            self._decisions.clear()
        for drop in dropped:
            try:
                drop()
            except Exception:  # a bug: log it, drop the others
                _log.exception("breakerd: answering a waiting decision failed")

    def _run(self, start: Start, waited: bool) -> None:
        """Runs a start holding a slot; frees the slot if it sent nothing."""
        if not _run(start, waited):
            self.done()


def _run(start: Start, waited: bool) -> bool:
    """``start(waited)``; an error in it frees the slot instead of leaking it."""
    try:
        return start(waited)
    except Exception:  # a bug: log it, never lose a slot
        _log.exception("breakerd: starting an RPC failed")
        return False
