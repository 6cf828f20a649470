"""Value types of the breakerd client: states, decisions, counters, errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, TypeVar

_E = TypeVar("_E", bound=enum.IntEnum)


class State(enum.IntEnum):
    """The ``breakerd.v1.State`` of a breaker."""

    UNSPECIFIED = 0
    CLOSED = 1
    OPEN = 2
    HALF_OPEN = 3
    FORCED_OPEN = 4
    FORCED_CLOSED = 5


class RejectReason(enum.IntEnum):
    """The ``breakerd.v1.RejectReason`` of a refusal."""

    UNSPECIFIED = 0
    OPEN = 1
    PROBE_IN_FLIGHT = 2
    RETRY_BUDGET = 3
    FORCED_OPEN = 4
    RAMP = 5
    """Gentle recovery: the breaker closed recently and admits a rising share
    of first attempts and no retry; ``retry_after`` may be 0."""


class Source(enum.Enum):
    """Who made a :class:`Decision`."""

    SIDECAR = "sidecar"
    """breakerd answered."""
    LOCAL = "local"
    """Decided in the client from the Watch cache, with no RPC: refused (the
    cache holds the breaker open), or granted (local decisions: a first
    attempt on a closed breaker whose policy allows them)."""
    FAIL_OPEN = "fail_open"
    """breakerd unreachable, too slow or away; allowed (``fail_mode="open"``), permit 0."""
    FAIL_CLOSED = "fail_closed"
    """breakerd unreachable, too slow or away; refused (``fail_mode="closed"``)."""


def enum_value(kind: type[_E], value: int, default: _E) -> _E:
    """``kind(value)``, or ``default`` for a value this client does not know."""
    try:
        return kind(value)
    except ValueError:
        return default


@dataclass(frozen=True)
class Decision:
    """The answer to an acquire: may the call be made?

    Attributes:
        allowed: make the call (then report it with ``permit``).
        source: who decided (see :class:`Source`).
        dependency: the dependency asked about; for ``acquire_first`` the one
            granted, or the last candidate when none was.
        permit: pass it back in the report; 0 when refused or failed open.
        probe: this call is the half-open probe: its result decides.
        state: the breaker's state as breakerd (or the Watch cache) saw it.
        reason: why it was refused (``UNSPECIFIED`` when allowed).
        retry_after: seconds until trying again is useful, when refused.
        chain: for a grant of ``acquire_first(..., chain=name)`` by breakerd,
            the chain's name (None otherwise). Pass it, with ``tier``, to
            :meth:`Client.report`; the guards and ``first`` do.
        tier: with ``chain``, the granted dependency's position in the
            caller's full chain (``first_tier`` + its index in the list
            asked about); 0 otherwise.
        generation: for a local grant (``allowed`` with source LOCAL), the
            generation of the Watch event it was decided on, which its
            outcome goes to breakerd with; 0 otherwise. Report a local
            grant with ``client.report(..., decision=d)``.
    """

    allowed: bool
    source: Source
    dependency: str
    permit: int = 0
    probe: bool = False
    state: State = State.UNSPECIFIED
    reason: RejectReason = RejectReason.UNSPECIFIED
    retry_after: float = 0.0
    chain: Optional[str] = None
    tier: int = 0
    generation: int = 0

    @property
    def local_grant(self) -> bool:
        """Granted in the client (local decisions): its outcome goes to
        breakerd in a batch, not in a Report RPC (there is no permit)."""
        return self.allowed and self.source is Source.LOCAL


@dataclass(frozen=True)
class Stats:
    """A snapshot of a client's counters (monotonic since the client started).

    Attributes:
        fail_open: decisions allowed because breakerd could not answer.
        fail_closed: decisions refused because breakerd could not answer.
        local_rejections: dependencies refused from the Watch cache, no RPC.
        report_errors: reports that breakerd did not accept or never got.
        watch_reconnects: times the Watch stream was opened again after it ended.
        away_decisions: decisions made with no RPC while breakerd was away
            (also counted in ``fail_open`` or ``fail_closed``).
        dropped_outcomes: outcomes of locally granted calls that never
            reached breakerd: past the 10,000 not yet acknowledged, made
            while breakerd was away or after close, or in a batch request
            that failed three times.
    """

    fail_open: int = 0
    fail_closed: int = 0
    local_rejections: int = 0
    report_errors: int = 0
    watch_reconnects: int = 0
    away_decisions: int = 0
    dropped_outcomes: int = 0


class BreakerOpenError(Exception):
    """The breaker refused the call, so it was not made.

    ``reason``, ``retry_after`` (seconds), ``source`` and ``dependency`` come
    from the refusing :class:`Decision`, kept as ``decision``.
    """

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.dependency = decision.dependency
        self.reason = decision.reason
        self.retry_after = decision.retry_after
        self.source = decision.source
        super().__init__(
            f"breaker refused {decision.dependency!r}: reason={decision.reason.name} "
            f"source={decision.source.name} retry_after={decision.retry_after:.3f}s"
        )


class InvalidArgumentError(ValueError):
    """A request broke a rule of the contract (a bad dependency or chain name,
    a chain tier out of range, an empty fallback list). A programming error:
    do not retry as is."""


class ClientClosedError(RuntimeError):
    """The client was closed: acquire, acquire_first, the guards, retry,
    first and wait_ready fail at once with this error (no RPC, nothing
    counted as fail-open). Its message says ``breakerd client is closed``.
    A report after close is dropped and counted in ``report_errors``."""

    def __init__(self) -> None:
        super().__init__("breakerd client is closed")
