"""Reports made while breakerd is away, held until it is back
(client/README.md, "Sidecar away")."""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

T = TypeVar("T")

LIMIT = 1024
"""Reports held at most; past that the oldest held one is dropped."""


class HeldReports(Generic[T]):
    """A bounded FIFO of reports not sent because breakerd is away: a permit
    never reported would keep its breaker from closing (a probe's would
    refuse the dependency ``PROBE_IN_FLIGHT`` for its whole lease), so they
    wait here and are sent once breakerd is back. Thread-safe."""

    def __init__(self, limit: int = LIMIT) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        # Constant after construction.
        self._limit = limit
        # Guarded by _lock.
        self._lock = threading.Lock()
        self._held: collections.deque[T] = collections.deque()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def hold(self, report: T) -> int:
        """Holds ``report``; returns how many older ones were dropped to make
        room (0 or 1: the caller counts them in ``report_errors``)."""
        with self._lock:
            dropped = 0
            if len(self._held) >= self._limit:
                self._held.popleft()
                dropped = 1
            self._held.append(report)
            return dropped

    def take(self) -> list[T]:
        """Every report held, oldest first; none is held afterwards."""
        with self._lock:
            taken = list(self._held)
            self._held.clear()
            return taken
