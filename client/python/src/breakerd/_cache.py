"""The Watch cache: what the client knows of each breaker from the stream."""

from __future__ import annotations

import threading
import time
from typing import NamedTuple, Optional

from ._types import RejectReason, State


class Refusal(NamedTuple):
    state: State
    reason: RejectReason
    retry_after: float


class StateCache:
    """``dependency -> (state, open_until)`` fed by Watch; thread-safe.

    ``open_until`` is a ``time.monotonic()`` instant: now + the cooldown left
    when the StateChange arrived.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[State, float]] = {}

    def apply(self, dependency: str, state: State, retry_after: float) -> None:
        until = time.monotonic() + retry_after if state == State.OPEN else 0.0
        with self._lock:
            self._entries[dependency] = (state, until)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def state(self, dependency: str) -> Optional[State]:
        with self._lock:
            entry = self._entries.get(dependency)
        return entry[0] if entry else None

    def refusal(self, dependency: str) -> Optional[Refusal]:
        """The local refusal for ``dependency``, or None to ask breakerd.

        Refuses while FORCED_OPEN, or OPEN with its cooldown still running;
        everything else (closed, half-open, open past its cooldown, unknown,
        forced closed) goes to breakerd.
        """
        with self._lock:
            entry = self._entries.get(dependency)
        if entry is None:
            return None
        state, until = entry
        if state == State.FORCED_OPEN:
            return Refusal(state, RejectReason.FORCED_OPEN, 0.0)
        if state == State.OPEN:
            left = until - time.monotonic()
            if left > 0:
                return Refusal(state, RejectReason.OPEN, left)
        return None
