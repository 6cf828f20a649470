"""Whether breakerd answers: present, failing, or away (client/README.md,
"Fail-open" and "Sidecar away")."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from ._changelog import ChangeLog

_log = logging.getLogger("breakerd")


class SidecarPresence:
    """What the client believes of breakerd; thread-safe.

    *Present* until a decision RPC fails. *Failing* (answered with an error)
    until an RPC answers again. *Away* (unavailable, or timed out with no
    other RPC answered since it was sent: see :meth:`answered_since`) until
    ``probe`` succeeds or :meth:`back` is called (the Watch stream delivered
    a message); a late answer to an RPC sent before does not end it, so the
    next decisions do not wait on a sidecar that is still hung. While away,
    and only then, a daemon thread calls ``probe`` every ``interval``
    seconds; ``on_back`` is called (in the thread that found breakerd back:
    the probe's or the Watch stream's) each time an away episode ends. Each
    change is logged once, never once per call, and at most
    one line per 10 s (see :class:`ChangeLog`; ``changes`` replaces the
    default one, e.g. with a test's clock).
    """

    def __init__(
        self,
        probe: Callable[[], bool],
        interval: float,
        *,
        target: str,
        fail_mode: str,
        changes: Optional[ChangeLog] = None,
        clock: Callable[[], float] = time.monotonic,
        on_back: Optional[Callable[[], None]] = None,
    ) -> None:
        # Constant after construction.
        self._on_back = on_back
        self._changes = changes if changes is not None else ChangeLog()
        self.clock = clock
        """Seconds, monotonic: when an RPC is sent and answered (a test's own)."""
        self._probe = probe
        self._interval = interval
        self._target = target
        self._fail_mode = fail_mode
        # Guarded by _lock. Away iff _episode is not None (and then failing);
        # setting the episode's event ends its probe thread.
        self._lock = threading.Lock()
        self._failing = False
        self._episode: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        self.away = False
        """Decide without breakerd: no Acquire, AcquireFirst or Report RPC.
        Written with _episode, under _lock; read without it (a plain
        attribute, for the callers' fast path)."""
        # When breakerd last answered an RPC of this client (self.clock()).
        # Guarded by _answer_lock; read without it (a float is read whole).
        self._answer_lock = threading.Lock()
        self._last_answer = float("-inf")
        # Held for each health check, and by pause() until resume(): a fork
        # never copies a check in flight.
        self._checking = threading.Lock()
        self._paused = False  # pause() holds _checking; only the forking thread reads it

    def failed(self, detail: str, away: bool) -> None:
        """A decision RPC failed; ``away``: breakerd is unavailable, or the
        RPC timed out with nothing answered since it was sent."""
        with self._lock:
            if self._closed:
                return
            was_failing, self._failing = self._failing, True
            if away and self._episode is None:
                self._episode = threading.Event()
                self.away = True
                self._thread = threading.Thread(
                    target=self._probe_until_back,
                    args=(self._episode,),
                    name="breakerd-away-probe",
                    daemon=True,
                )
                self._thread.start()
                self._changes.change(
                    "unreachable",
                    logging.WARNING,
                    "breakerd at %s cannot answer (%s): failing %s with no RPC "
                    "until it answers a health check",
                    self._target,
                    detail,
                    self._fail_mode,
                )
            elif not was_failing:
                self._changes.change(
                    "unreachable",
                    logging.WARNING,
                    "breakerd at %s cannot answer (%s): failing %s",
                    self._target,
                    detail,
                    self._fail_mode,
                )

    def note_answer(self) -> None:
        """breakerd answered an RPC of this client (an Acquire, AcquireFirst
        or Report: a decision, a refusal, an accepted report, or an error
        only breakerd sends)."""
        now = self.clock()
        with self._answer_lock:  # never backwards, whichever thread stamps last
            if now > self._last_answer:
                self._last_answer = now

    def answered_since(self, sent_at: float) -> bool:
        """Whether breakerd answered an RPC of this client after ``sent_at``
        (a :attr:`clock` time): then an RPC sent at ``sent_at`` that timed out
        was late, not lost to a hung sidecar (client/README.md, "Sidecar
        away")."""
        return self._last_answer > sent_at

    def answered(self) -> None:
        """A decision RPC got breakerd's answer: noted (:meth:`note_answer`);
        no longer failing, unless away."""
        self.note_answer()
        if not self._failing:  # unlocked fast path; decided under the lock
            return
        with self._lock:
            if self._episode is not None or not self._failing:
                return
            self._failing = False
            self._changes.change(
                "back", logging.INFO, "breakerd at %s answers again", self._target
            )

    def back(self, episode: Optional[threading.Event] = None) -> None:
        """breakerd is reachable again (the Watch stream delivered a message,
        or the probe of ``episode`` succeeded): present, probe stopped."""
        if self._episode is None:  # unlocked fast path: every Watch message
            return
        with self._lock:
            if self._episode is None or (episode is not None and episode is not self._episode):
                return  # already back, or a stale probe of an earlier episode
            self._episode.set()
            self._episode = None
            self.away = False
            self._thread = None
            self._failing = False
            self._changes.change(
                "back", logging.INFO, "breakerd at %s answers again", self._target
            )
        if self._on_back is not None:
            try:
                self._on_back()
            except Exception:  # a bug: never let the probe or Watch thread die of it
                _log.exception("breakerd: sending the reports held while away failed")

    def close(self, timeout: float) -> None:
        """Stops the probe thread (waiting at most ``timeout`` seconds for a
        check in flight); nothing starts afterwards. Idempotent."""
        with self._lock:
            self._closed = True
            if self._episode is not None:
                self._episode.set()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def pause(self) -> None:
        """Before a fork: waits for a health check in flight (bounded by its
        deadline) and starts none until :meth:`resume`."""
        self._paused = self._checking.acquire(timeout=5.0)

    def resume(self) -> None:
        """After a fork, in the parent: health checks may run again."""
        if self._paused:
            self._paused = False
            self._checking.release()

    def _probe_until_back(self, episode: threading.Event) -> None:
        while not episode.wait(self._interval):
            try:
                with self._checking:
                    ok = self._probe()
            except Exception:  # never let the thread die while away
                _log.exception("breakerd health probe failed")
                ok = False
            if ok:
                self.back(episode)
                return
