"""What a client decided without breakerd, on its way there in ReportBatch
requests (client/README.md, "Local decisions")."""

from __future__ import annotations

import collections
import enum
import os
import threading
import time
from typing import Callable, Optional, Tuple, TypeVar

from ._outcome import Outcome
from ._proto import breaker_pb2 as pb
from ._types import Decision

MAX_UNACKNOWLEDGED = 10_000
"""Outcomes held at most, queued or in a request not yet acknowledged; past
that an outcome is dropped (counted in ``dropped_outcomes``)."""

PER_REQUEST = 1_000
"""Outcomes per ReportBatch request at most (breakerd refuses more); a
batch is flushed at once when this many are queued."""

MAX_ENTRIES = 1_000
"""Entries per list of a request at most (dependencies, chains, decisions:
breakerd refuses more)."""

MAX_SENDS = 3
"""Times one request is sent (the first time and resent unchanged) before
it is dropped."""

REFUSED_LOCAL, FAIL_OPEN, FAIL_CLOSED = 0, 1, 2
"""The kinds of decision made without breakerd, counted per dependency
(``ClientDecisions``)."""

_MAX_DURATION_NANOS = 24 * 3600 * 1_000_000_000  # breakerd's longest latency or retry_after

_YIELD_EVERY = 15  # a mask: at every 16th outcome queued (when 16 or more wait)

LocalOutcome = Tuple[Decision, Outcome, float]
"""A locally granted call's outcome: its grant, how it went, its latency (s)."""


_Item = TypeVar("_Item")


class Sent(enum.Enum):
    """What became of one ReportBatch request."""

    OK = "ok"
    """breakerd acknowledged it (whatever it counted: nothing to resend)."""
    RETRY = "retry"
    """It failed in a way a resend may cure (deadline, unavailable)."""
    DROP = "drop"
    """breakerd will never take it (invalid, too large, unimplemented)."""


def new_client_id() -> str:
    """``python-<pid>-<8 random hex digits>``, named like a dependency: new
    in each process (a forked child's differs from its parent's)."""
    return f"python-{os.getpid()}-{os.urandom(4).hex()}"


class LocalBatch:
    """Local grants, their outcomes and the client's own decisions, queued
    until a flush takes them into one ReportBatch request.

    The callers' side (:meth:`grant`, :meth:`outcome`) takes no lock and
    allocates at most the outcome's tuple: a deque's append and len are
    atomic under the GIL. While 16 or more outcomes wait (a caller's loop
    faster than the flushes), every 16th queued yields the GIL: a loop of
    guarded calls that never releases it otherwise holds off the client's
    own threads (the flusher, the Watch stream and gRPC's, which must run
    for a trip to reach the cache) for CPython's switch interval, 5 ms, at
    each handoff, and the trip reaction grows from about 10 ms to 50.
    :meth:`count_decision` (refusals and fail-open or fail-closed
    decisions, off the fast path) takes a short lock. The flusher's side
    (:meth:`next_request`, :meth:`sent`) runs in one thread at a time.
    ``wake`` is called, from the caller's thread, when the flusher has said
    it is idle (:attr:`idle`) and work arrives, or when a full request's
    worth of outcomes is queued.
    """

    def __init__(
        self,
        client_id: str,
        *,
        limit: int = MAX_UNACKNOWLEDGED,
        per_request: int = PER_REQUEST,
        max_sends: int = MAX_SENDS,
    ) -> None:
        # Constant after construction (but for close()).
        self.client_id = client_id
        self._limit = limit
        self._per_request = per_request
        self._max_sends = max_sends
        self.wake: Callable[[], None] = _nothing
        """Set by the flusher: wakes it."""
        # Appended by callers, taken by the flusher.
        self._grants: collections.deque[Decision] = collections.deque()
        self._outcomes: collections.deque[LocalOutcome] = collections.deque()
        self.idle = False
        """Written by the flusher: True while it waits for work (then the
        first caller to queue something wakes it)."""
        # Guarded by _lock: dependency -> [refused_local, fail_open, fail_closed].
        self._lock = threading.Lock()
        self._decisions: dict[str, list[int]] = {}
        # The flusher's own (one thread at a time); _pending_outcomes is read
        # by callers (an int is read whole).
        self._sequence = 0
        self._pending: Optional[pb.ReportBatchRequest] = None
        self._pending_outcomes = 0
        self._sends = 0

    # -- the callers' side ---------------------------------------------------

    def grant(self, decision: Decision) -> None:
        """A first attempt granted in the client (``decision`` is the cache's
        local-grant Decision, or a chain's copy of it)."""
        self._grants.append(decision)
        if self.idle:
            self.wake()

    def outcome(self, decision: Decision, outcome: Outcome, latency: float) -> bool:
        """Queues the outcome of a call granted by ``decision``; False (not
        queued: the caller counts it dropped) when :data:`MAX_UNACKNOWLEDGED`
        outcomes are held already, or after :meth:`close`."""
        queued = len(self._outcomes)
        if queued + self._pending_outcomes >= self._limit:
            return False
        self._outcomes.append((decision, outcome, latency))
        if self.idle or queued + 1 == self._per_request:
            self.wake()
        elif queued & _YIELD_EVERY == _YIELD_EVERY:
            _yield_gil()
        return True

    def count_decision(self, dependency: str, kind: int) -> None:
        """One decision made without breakerd: :data:`REFUSED_LOCAL`,
        :data:`FAIL_OPEN` or :data:`FAIL_CLOSED`. Counters, sent with the
        next request (kept while breakerd is away)."""
        with self._lock:
            counts = self._decisions.get(dependency)
            if counts is None:
                counts = self._decisions[dependency] = [0, 0, 0]
            counts[kind] += 1
        if self.idle:
            self.wake()

    def close(self) -> None:
        """No outcome is queued from now on (:meth:`outcome` says False)."""
        self._limit = 0

    # -- the flusher's side --------------------------------------------------

    @property
    def unacknowledged(self) -> int:
        """Outcomes queued or in the request not yet acknowledged."""
        return len(self._outcomes) + self._pending_outcomes

    def has_work(self) -> bool:
        """Whether there is anything to send (or to send again)."""
        return bool(self._pending is not None or self._grants or self._outcomes or self._decisions)

    def backlog(self) -> bool:
        """Whether a full request's worth of outcomes is queued (send at once)."""
        return len(self._outcomes) >= self._per_request

    def next_request(self) -> Optional[pb.ReportBatchRequest]:
        """The request to send now: the one that failed, unchanged (same
        sequence), else a new one (the next sequence) with what was queued
        since, at most :data:`PER_REQUEST` outcomes and :data:`MAX_ENTRIES`
        entries in each list (the rest waits for the next request); None
        when there is nothing to send. Every request returned must be
        followed by :meth:`sent`."""
        if self._pending is not None:
            return self._pending
        outcomes = self._take_outcomes(self._per_request)
        # After the outcomes: every grant queued before one of them is sent
        # with it or earlier, so breakerd never sees an outcome beyond its grants.
        grants = self._take_all(self._grants)
        with self._lock:
            decisions, self._decisions = self._decisions, {}
        if not (outcomes or grants or decisions):
            return None
        request, grants_left, decisions_left = _build(
            self.client_id, self._sequence + 1, grants, outcomes, decisions
        )
        self._grants.extendleft(grants_left)  # order does not matter among grants
        if decisions_left:
            with self._lock:
                for dependency, counts in decisions_left.items():
                    held = self._decisions.setdefault(dependency, [0, 0, 0])
                    for kind, count in enumerate(counts):
                        held[kind] += count
        self._sequence += 1
        self._pending = request
        self._pending_outcomes = len(outcomes)
        self._sends = 0
        return request

    def sent(self, result: Sent) -> int:
        """What became of the request :meth:`next_request` returned. Returns
        how many outcomes were dropped with it (a request that failed
        :data:`MAX_SENDS` times, or that breakerd will never take): the
        caller counts them in ``dropped_outcomes``."""
        if self._pending is None:
            return 0
        self._sends += 1
        if result is Sent.RETRY and self._sends < self._max_sends:
            return 0
        dropped = 0 if result is Sent.OK else self._pending_outcomes
        self._pending = None
        self._pending_outcomes = 0
        return dropped

    def discard(self) -> int:
        """Drops everything not sent (at close); returns the outcomes dropped."""
        dropped = self._pending_outcomes + len(self._take_all(self._outcomes))
        self._pending = None
        self._pending_outcomes = 0
        self._take_all(self._grants)
        with self._lock:
            self._decisions = {}
        return dropped

    def _take_outcomes(self, most: int) -> list[LocalOutcome]:
        """Takes up to ``most`` queued outcomes, oldest first."""
        taken: list[LocalOutcome] = []
        pop = self._outcomes.popleft
        try:
            while len(taken) < most:
                taken.append(pop())
        except IndexError:
            pass
        return taken

    @staticmethod
    def _take_all(queue: collections.deque[_Item]) -> list[_Item]:
        """Takes everything queued (callers may append meanwhile: each
        popleft is atomic)."""
        taken: list[_Item] = []
        pop = queue.popleft
        try:
            while True:
                taken.append(pop())
        except IndexError:
            pass
        return taken


def _nothing() -> None:
    pass


def _yield_gil() -> None:
    """Lets the threads waiting for the GIL run (a sleep of 0 releases it)."""
    time.sleep(0)


def _build(
    client_id: str,
    sequence: int,
    grants: list[Decision],
    outcomes: list[LocalOutcome],
    decisions: dict[str, list[int]],
) -> tuple[pb.ReportBatchRequest, list[Decision], dict[str, list[int]]]:
    """One ReportBatchRequest: per (dependency, generation) the grants and
    outcomes, the chain decisions of the grants, the client decisions; at
    most MAX_ENTRIES of each. Returns it with the grants and decisions left
    for the next request (an outcome's grant is never left: it shares the
    outcome's entry)."""
    request = pb.ReportBatchRequest(client_id=client_id, sequence=sequence)
    batches: dict[tuple[str, int], pb.DependencyBatch] = {}

    def batch_of(decision: Decision) -> pb.DependencyBatch:
        key = (decision.dependency, decision.generation)
        found = batches.get(key)
        if found is None:
            found = batches[key] = request.dependencies.add(
                dependency=decision.dependency, generation=decision.generation
            )
        return found

    last: Optional[Decision] = None
    add = None
    for decision, outcome, latency in outcomes:
        if decision is not last:  # runs of one grant Decision are the common case
            add, last = batch_of(decision).outcomes.add, decision
        assert add is not None
        local = add(outcome=outcome.kind, http_status=outcome.http_status)
        if outcome.grpc_code is not None:
            local.grpc_code = outcome.grpc_code
        duration = local.latency
        duration.seconds, duration.nanos = divmod(_nanos(latency), 1_000_000_000)
        if outcome.retry_after is not None:
            local.retry_after.FromNanoseconds(_nanos(outcome.retry_after))
        if decision.chain:
            local.chain, local.tier = decision.chain, decision.tier

    grants_left: list[Decision] = []
    granted: dict[tuple[str, int], int] = {}
    chains: dict[tuple[str, int], int] = {}
    for decision in grants:
        key = (decision.dependency, decision.generation)
        count = granted.get(key)
        if count is None:
            if len(batches) >= MAX_ENTRIES and key not in batches:
                grants_left.append(decision)
                continue
            batch_of(decision)
            count = 0
        if decision.chain:
            chain_key = (decision.chain, decision.tier)
            if chain_key not in chains and len(chains) >= MAX_ENTRIES:
                grants_left.append(decision)
                continue
            chains[chain_key] = chains.get(chain_key, 0) + 1
        granted[key] = count + 1
    for key, count in granted.items():
        batches[key].grants = count
    for (chain, tier), count in chains.items():
        request.chains.add(chain=chain, tier=tier, count=count)

    decisions_left: dict[str, list[int]] = {}
    for dependency, (refused, fail_open, fail_closed) in decisions.items():
        if len(request.decisions) >= MAX_ENTRIES:
            decisions_left[dependency] = [refused, fail_open, fail_closed]
            continue
        request.decisions.add(
            dependency=dependency,
            refused_local=refused,
            fail_open=fail_open,
            fail_closed=fail_closed,
        )
    return request, grants_left, decisions_left


def _nanos(seconds: float) -> int:
    """A duration for breakerd: whole nanoseconds, 0 to 24 h (it refuses a
    batch holding one outside that range)."""
    return min(max(0, int(seconds * 1e9)), _MAX_DURATION_NANOS)
