"""When a client's local decisions go to breakerd: a daemon thread that
sends one ReportBatch at a time (client/README.md, "Local decisions")."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from ._batch import LocalBatch, Sent
from ._proto import breaker_pb2 as pb

_log = logging.getLogger("breakerd")

FLUSH_INTERVAL = 0.005
"""Seconds between flushes while there is something to send (the default)."""

Send = Callable[[pb.ReportBatchRequest, float], Sent]
"""``send(request, timeout)``: one ReportBatch RPC, blocking, with that
deadline (seconds); says what became of it. Never raises."""


class BatchFlusher:
    """Sends a :class:`LocalBatch` to breakerd: every ``interval`` seconds
    while it holds something, at once when a full request's worth of
    outcomes is queued, never while breakerd is ``away()`` (then the batch
    waits until :meth:`wake` says it is back), and once more at
    :meth:`close`. One request is in flight at a time, sent with the
    ``timeout`` deadline from this thread (outside the async path's send
    window); a failed one is sent again unchanged at the next flush.

    Nothing runs while there is nothing to send: the thread waits on an
    event that the first caller to queue something sets (it reads a flag,
    :attr:`LocalBatch.idle`, takes no lock otherwise). Thread-safe.
    """

    def __init__(
        self,
        batch: LocalBatch,
        send: Send,
        *,
        interval: float,
        timeout: float,
        away: Callable[[], bool],
        on_dropped: Callable[[int], None],
    ) -> None:
        # Constant after construction.
        self._batch = batch
        self._send = send
        self._interval = interval
        self._timeout = timeout
        self._away = away
        self._on_dropped = on_dropped
        self._wake = threading.Event()
        batch.wake = self._wake.set
        # Guarded by _cond: stop and fork requests, and whether the thread
        # has parked for a fork.
        self._cond = threading.Condition(threading.Lock())
        self._stopping = False
        self._forking = False
        self._parked = False
        self._thread = threading.Thread(target=self._loop, name="breakerd-batch", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """breakerd is back (or something changed): look at the batch now."""
        self._wake.set()

    def pause(self, timeout: float) -> None:
        """Before a fork: waits (at most ``timeout`` seconds) until the thread
        is outside grpc (a request in flight is finished first) and keeps it
        there until :meth:`resume`."""
        with self._cond:
            self._forking = True
        self._wake.set()
        with self._cond:
            self._cond.wait_for(lambda: self._parked or not self._thread.is_alive(), timeout)

    def resume(self) -> None:
        """After a fork, in the parent."""
        with self._cond:
            self._forking = False
            self._cond.notify_all()
        self._wake.set()

    def close(self, timeout: float) -> None:
        """Stops the thread (after the request in flight, waiting at most
        ``timeout`` + its deadline), then, unless breakerd is away, sends
        what is left in this thread for at most ``timeout`` seconds; what is
        still unsent is dropped, its outcomes counted. Idempotent."""
        self._batch.close()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(self._timeout + timeout)
        if not self._thread.is_alive():
            deadline = time.monotonic() + timeout
            while not self._away() and self._batch.has_work():
                left = deadline - time.monotonic()
                if left <= 0 or self._send_one(left) is not Sent.OK:
                    break
        dropped = self._batch.discard()
        if dropped:
            self._on_dropped(dropped)

    def _loop(self) -> None:
        batch = self._batch
        flushed = 0.0  # when the last flush began (time.monotonic())
        while True:
            with self._cond:
                while self._forking and not self._stopping:
                    self._parked = True
                    self._cond.notify_all()
                    self._cond.wait()
                self._parked = False
                if self._stopping:
                    return
            away = self._away()
            if away or not batch.has_work():
                # Idle: the first caller to queue something wakes us; while
                # breakerd is away only its return does (callers count
                # fail-open decisions then, which must not spin this loop).
                batch.idle = not away
                if away or not batch.has_work():
                    self._wake.wait()
                batch.idle = False
                self._wake.clear()
                flushed = time.monotonic()  # the first of a run waits a whole interval
                continue
            if not batch.backlog():
                # Every interval from the last flush's start (woken early by
                # a full request's worth, a fork or close): what was queued
                # while a request was out waits no longer than that.
                left = flushed + self._interval - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    self._wake.clear()
                    if self._forking or self._stopping or self._away():
                        continue
            flushed = time.monotonic()
            try:
                self._send_one(self._timeout)
            except Exception:  # a bug: never let the thread die
                _log.exception("breakerd: sending a batch of local decisions failed")

    def _send_one(self, timeout: float) -> Optional[Sent]:
        """Sends the batch's next request (or the one to send again); None
        if there was nothing to send."""
        request = self._batch.next_request()
        if request is None:
            return None
        result = self._send(request, timeout)
        dropped = self._batch.sent(result)
        if dropped:
            self._on_dropped(dropped)
        return result
