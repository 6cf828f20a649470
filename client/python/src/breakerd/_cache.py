"""The Watch cache: what the client knows of each breaker from the stream."""

from __future__ import annotations

import threading
import time
from typing import Callable, NamedTuple, Optional

from ._types import Decision, RejectReason, Source, State

SHADOW = "shadow"
"""The ``StateChange.mode`` of a breaker that never refuses: breakerd always
allows its calls, so the client never refuses it locally. Any other mode
("enforce", or empty from an older breakerd) enforces."""

EVICTED = "evicted"
"""The ``StateChange.reason`` of a breaker breakerd forgot: so does the cache."""


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
    """``dependency -> (state, mode, generation, open_until, local_decisions)``
    fed by Watch; thread-safe.

    ``open_until`` is a ``clock()`` instant (monotonic): now + the cooldown
    left when the StateChange arrived. An event older than the one held for
    its dependency (a lower generation) is ignored; an equal generation is
    applied, since the events that are not transitions (``reload``,
    ``ramp_done``) change the mode or ``local_decisions`` at the same
    generation. ``evicted`` removes the dependency.

    With ``local_decisions`` on, :attr:`grants` holds, for each dependency
    a first attempt may be granted in the client (CLOSED, the event's
    ``local_decisions`` true, not shadow), the Decision of such a grant,
    built once per event: the fast path reads it with one dict lookup and no
    lock (a dict's get, set and pop are atomic under the GIL), and allocates
    nothing.
    """

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, local_decisions: bool = False
    ) -> None:
        # Constant after construction.
        self._clock = clock
        self._local_decisions = local_decisions
        # Written under _lock (by the Watch thread, and clear() at close);
        # grants is read without it.
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self.grants: dict[str, Decision] = {}
        """dependency -> the Decision of a local grant (see the class doc)."""

    def apply(
        self,
        dependency: str,
        state: State,
        retry_after: float,
        generation: int,
        mode: str,
        local_decisions: bool = False,
        reason: str = "",
    ) -> bool:
        """Records one StateChange; False if it was older than what is held."""
        until = self._clock() + retry_after if state == State.OPEN else 0.0
        shadow = mode == SHADOW
        entry = _Entry(state, shadow, generation, until)
        grant: Optional[Decision] = None
        if self._local_decisions and local_decisions and state == State.CLOSED and not shadow:
            grant = Decision(
                allowed=True,
                source=Source.LOCAL,
                dependency=dependency,
                state=State.CLOSED,
                generation=generation,
            )
        with self._lock:
            held = self._entries.get(dependency)
            if held is not None and generation < held.generation:
                return False
            if reason == EVICTED:
                self._entries.pop(dependency, None)
                self.grants.pop(dependency, None)
                return True
            self._entries[dependency] = entry
            if grant is None:
                self.grants.pop(dependency, None)
            else:
                self.grants[dependency] = grant
        return True

    def clear(self) -> None:
        """Forgets everything (the stream ended: generations start over, and
        nothing is granted locally until a new stream says so)."""
        with self._lock:
            self.grants.clear()
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
