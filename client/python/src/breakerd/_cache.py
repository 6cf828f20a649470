"""The Watch cache: what the client knows of each breaker from the stream."""

from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple, Optional

from ._types import RejectReason, State

SHADOW = "shadow"
"""The ``StateChange.mode`` of a breaker that never refuses: breakerd always
allows its calls, so the client never refuses it locally. Any other mode
("enforce", or empty from an older breakerd) enforces."""


class Refusal(NamedTuple):
    state: State
    reason: RejectReason
    retry_after: float


class _Entry(NamedTuple):
    state: State
    shadow: bool
    generation: int
    open_until: float  # clock() instant; 0 unless OPEN


class StateCache:
    """``dependency -> (state, mode, generation, open_until)`` fed by Watch;
    thread-safe.

    ``open_until`` is a ``clock()`` instant (monotonic): now + the cooldown
    left when the StateChange arrived. An event older than the one held for
    its dependency (a lower generation) is ignored; an equal generation is
    applied, since a ``reload`` event changes the mode without a transition.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def apply(
        self,
        dependency: str,
        state: State,
        retry_after: float,
        generation: int,
        mode: str,
    ) -> bool:
        """Records one StateChange; False if it was older than what is held."""
        until = self._clock() + retry_after if state == State.OPEN else 0.0
        entry = _Entry(state, mode == SHADOW, generation, until)
        with self._lock:
            held = self._entries.get(dependency)
            if held is not None and generation < held.generation:
                return False
            self._entries[dependency] = entry
        return True

    def clear(self) -> None:
        """Forgets everything (the stream ended: generations start over)."""
        with self._lock:
            self._entries.clear()

    def state(self, dependency: str) -> Optional[State]:
        with self._lock:
            entry = self._entries.get(dependency)
        return entry.state if entry else None

    def refusal(self, dependency: str) -> Optional[Refusal]:
        """The local refusal for ``dependency``, or None to ask breakerd.

        Refuses an enforcing breaker while FORCED_OPEN, or OPEN with its
        cooldown still running; everything else (closed, half-open, open
        past its cooldown, unknown, forced closed, shadow) goes to breakerd.
        """
        with self._lock:
            entry = self._entries.get(dependency)
        if entry is None or entry.shadow:
            return None
        if entry.state == State.FORCED_OPEN:
            return Refusal(entry.state, RejectReason.FORCED_OPEN, 0.0)
        if entry.state == State.OPEN:
            left = entry.open_until - self._clock()
            if left > 0:
                return Refusal(entry.state, RejectReason.OPEN, left)
        return None
