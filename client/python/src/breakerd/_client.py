"""The breakerd client: acquire, report, guard, retry, fallback chain."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import os
import random
import re
import threading
import time
import weakref
from types import TracebackType
from typing import (
    Any,
    Awaitable,
    Callable,
    Literal,
    Optional,
    Sequence,
    Tuple,
    TypeVar,
    Union,
    cast,
)

import grpc
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2  # grpc-stubs types this module as Any

from ._batch import FAIL_CLOSED, FAIL_OPEN, REFUSED_LOCAL, LocalBatch, Sent, new_client_id
from ._cache import StateCache
from ._changelog import ChangeLog
from ._flusher import FLUSH_INTERVAL, BatchFlusher
from ._held import HeldReports
from ._outcome import Outcome, OutcomeKind
from ._presence import SidecarPresence
from ._proto import breaker_pb2 as pb
from ._send_window import SendWindow
from ._types import (
    BreakerOpenError,
    ClientClosedError,
    Decision,
    InvalidArgumentError,
    RejectReason,
    Source,
    State,
    Stats,
    enum_value,
)

FailMode = Literal["open", "closed"]

__all__ = ["AsyncGuard", "Client", "Guard", "DEFAULT_TARGET"]

DEFAULT_TARGET = "127.0.0.1:50051"
"""Where breakerd listens unless ``target`` or ``$BREAKERD_ADDR`` says otherwise."""

_log = logging.getLogger("breakerd")
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])
_NAME = re.compile(r"[A-Za-z0-9._:/@-]{1,200}")
_MAX_TIER = 63  # a chain's tiers are 0 to 63 (breakerd counts them per tier)
Classifier = Callable[[BaseException], Optional[Outcome]]
ChannelOptions = Sequence[Tuple[str, Any]]
_PB_OUTCOME = {kind: "OUTCOME_" + kind.name for kind in OutcomeKind}  # enum names
# Errors only a server that read the request sends: breakerd answered.
_ANSWER_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_LOCAL = Source.LOCAL
_SUCCESS = Outcome.SUCCESS
_monotonic = time.monotonic


def _fork_support_enabled() -> bool:
    """Whether grpc's fork handlers run (GRPC_ENABLE_FORK_SUPPORT, read when
    grpc is imported): only then can a forked child open a new channel."""
    try:
        from grpc._cython import cygrpc  # type: ignore[attr-defined]  # private: fallback below

        return bool(cygrpc.is_fork_support_enabled())
    except (ImportError, AttributeError):
        return os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() in ("1", "true", "yes")


# Every open Client, so that a forked child can mark them (see _forget_parent).
_CLIENTS: weakref.WeakSet[Client] = weakref.WeakSet()
# What a forked child inherited of its parent's grpc objects: kept referenced
# so that no destructor of the parent's channel or calls runs in the child.
_PARENT_GRPC_OBJECTS: list[object] = []


_fork_hooks_lock = threading.Lock()
_fork_hooks_registered = False


def _register_fork_hooks() -> None:
    """Once, after the first channel exists (grpc then has registered its
    own fork handlers): the before hook therefore runs before grpc's, and
    the child hook after grpc has closed the parent's channels."""
    global _fork_hooks_registered
    if not hasattr(os, "register_at_fork"):  # not POSIX
        return
    with _fork_hooks_lock:
        if not _fork_hooks_registered:
            os.register_at_fork(
                before=_before_fork,
                after_in_parent=_after_fork_in_parent,
                after_in_child=_after_fork_in_child,
            )
            _fork_hooks_registered = True


def _before_fork() -> None:
    for client in list(_CLIENTS):
        client._pause_for_fork()


def _after_fork_in_parent() -> None:
    for client in list(_CLIENTS):
        client._resume_after_fork()


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._forget_parent()


def _method(service: str, method: str) -> str:
    return "/%s/%s" % (pb.DESCRIPTOR.services_by_name[service].full_name, method)


def _seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def _check_name(name: str, field: str = "dependency") -> None:
    """Raises InvalidArgumentError naming ``field`` unless ``name`` is a
    valid dependency name (a chain's name follows the same rule)."""
    valid = isinstance(name, str) and _NAME.fullmatch(name) is not None
    if not valid:
        raise InvalidArgumentError(
            f"{field}: {name!r} must be 1-200 characters of [A-Za-z0-9._:/@-]"
        )


def _check_chain(chain: Optional[str], first_tier: int, count: int, field: str) -> None:
    """Raises InvalidArgumentError unless ``chain`` is None (then ``field``,
    the tier of the first of ``count`` dependencies, must be 0) or a valid
    name whose ``count`` tiers from ``first_tier`` on are all at most 63."""
    if chain is None:
        if first_tier != 0:
            raise InvalidArgumentError(f"{field}: {first_tier!r} needs a chain name")
        return
    _check_name(chain, "chain")
    whole = isinstance(first_tier, int) and not isinstance(first_tier, bool)
    if not whole or first_tier < 0 or first_tier + count - 1 > _MAX_TIER:
        raise InvalidArgumentError(
            f"{field}: {first_tier!r} with {count} dependencies: a chain's tiers are "
            f"0 to {_MAX_TIER}"
        )


class _Health:
    """Logs once when something starts failing and once when it recovers
    (at most one line per 10 s: see :class:`ChangeLog`)."""

    def __init__(self, failing: str, recovered: str) -> None:
        self._lock = threading.Lock()
        self._failing = False
        self._failing_msg = failing
        self._recovered_msg = recovered
        self._changes = ChangeLog()

    def failed(self, detail: str) -> None:
        with self._lock:
            if self._failing:
                return
            self._failing = True
        self._changes.change(
            "failing", logging.WARNING, "%s (%s)", self._failing_msg, detail
        )

    def ok(self) -> None:
        if not self._failing:  # unlocked fast path; the swap below decides
            return
        with self._lock:
            was_failing, self._failing = self._failing, False
        if was_failing:
            self._changes.change("ok", logging.INFO, "%s", self._recovered_msg)


class Client:
    """A connection to breakerd: one gRPC channel and one Watch stream.

    Create one per process and share it: every method is thread-safe, and the
    guards may be used from any number of threads and asyncio tasks.

    A Client made before the process forks (a pre-fork server) works in the
    child: its first use there opens a new channel and Watch stream, never
    touching the parent's. That needs grpc's fork support
    (``GRPC_ENABLE_FORK_SUPPORT=1`` in the environment before grpc is
    imported); without it the child's first use raises RuntimeError saying
    so, rather than hang.

    Args:
        target: breakerd's address, ``host:port`` or ``unix:/path``. Default:
            ``$BREAKERD_ADDR``, else ``127.0.0.1:50051``.
        decision_timeout: seconds; the deadline of every Acquire, AcquireFirst
            and Report RPC (default 0.02). breakerd slower than this counts as
            unreachable.
        fail_mode: ``"open"`` (default): when breakerd cannot answer, allow
            (source FAIL_OPEN); ``"closed"``: refuse (source FAIL_CLOSED).
        watch: keep a Watch stream and refuse locally, with no RPC, while it
            says a breaker is open (default True; a shadow breaker is never
            refused locally). The stream runs in a daemon thread and
            reconnects with full-jitter backoff.
        watch_backoff: (first, max) reconnect delay in seconds, doubling from
            first to max, full jitter (default 0.1 to 5.0).
        local_decisions: with ``watch``, grant first attempts in the client,
            with no RPC (source LOCAL, permit 0), while the Watch stream
            says the breaker is closed and its policy allows it (default
            True); their outcomes go to breakerd in batches (ReportBatch).
            Everything else (retries, half-open, forced, ramping, shadow,
            unknown dependencies, breakerd away or the stream down) goes to
            breakerd as before.
        flush_interval: seconds between the batches of local decisions
            while there is something to send (default 0.005).
        away_probe_interval: seconds between health checks while breakerd
            is away (default 0.1). An Acquire or AcquireFirst that finds
            breakerd unavailable, or times out while breakerd answered no
            other RPC of this client after it was sent, makes it away:
            decisions then fail open (or closed) at once, with no RPC, and
            Reports are held (sent once breakerd is back), until a
            ``grpc.health.v1.Health/Check`` succeeds or the Watch stream
            delivers a message. Nothing runs while breakerd is
            present. One that times out while breakerd answers others was
            only late: that decision alone fails open.
        classifier: maps an exception raised by a guarded call to an Outcome;
            return None to fall back to :meth:`Outcome.from_exception`. If it
            raises, the permit is reported as :meth:`Outcome.from_exception`
            classifies the call's error, and the classifier's error reaches
            the caller (retry and first stop there).
        channel_options: extra gRPC channel options.
    """

    def __init__(
        self,
        target: Optional[str] = None,
        *,
        decision_timeout: float = 0.02,
        fail_mode: FailMode = "open",
        watch: bool = True,
        watch_backoff: Tuple[float, float] = (0.1, 5.0),
        away_probe_interval: float = 0.1,
        classifier: Optional[Classifier] = None,
        channel_options: ChannelOptions = (),
        local_decisions: bool = True,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        if fail_mode not in ("open", "closed"):
            raise ValueError(f"fail_mode must be 'open' or 'closed', got {fail_mode!r}")
        if not decision_timeout > 0:
            raise ValueError("decision_timeout must be positive")
        if not away_probe_interval > 0:
            raise ValueError("away_probe_interval must be positive")
        if not flush_interval > 0:
            raise ValueError("flush_interval must be positive")
        self.target: str = target or os.environ.get("BREAKERD_ADDR") or DEFAULT_TARGET
        self.decision_timeout = float(decision_timeout)
        self.fail_mode: FailMode = fail_mode
        self._classifier = classifier
        self._backoff_first, self._backoff_max = watch_backoff

        self._away_probe_interval = away_probe_interval
        self._watch = watch
        self._local_decisions = watch and local_decisions
        self._flush_interval = float(flush_interval)
        self._channel_options: list[tuple[str, Any]] = [
            ("grpc.enable_http_proxy", 0),  # a sidecar is local: never via a proxy
            # Reconnect to a restarted sidecar quickly, not after grpc's 1 s+ backoff.
            # (Not min_reconnect_backoff_ms: that is also the connect timeout.)
            ("grpc.initial_reconnect_backoff_ms", 100),
            # Capped at 1 s (client/README.md): back within about a second
            # of a restarted sidecar, however long it was gone.
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        self._channel_options.extend(channel_options)

        # Everything below belongs to one process: a forked child drops it
        # (_forget_parent) and builds its own on first use (_connect).
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._counts = {name: 0 for name in Stats.__dataclass_fields__}
        self._closed = threading.Event()
        self._connect()
        _CLIENTS.add(self)
        _register_fork_hooks()

    def _connect(self) -> None:
        """Builds this process's channel, RPCs, presence, cache and Watch
        thread. REQUIRES: no other thread uses the client yet (the
        constructor), or ``_lock`` held in a forked child."""
        self._channel = grpc.insecure_channel(self.target, options=self._channel_options)
        ch = self._channel
        self._acquire_rpc: grpc.UnaryUnaryMultiCallable[pb.AcquireRequest, pb.AcquireResponse]
        self._acquire_rpc = ch.unary_unary(
            _method("Breaker", "Acquire"),
            request_serializer=pb.AcquireRequest.SerializeToString,
            response_deserializer=pb.AcquireResponse.FromString,
        )
        self._acquire_first_rpc: grpc.UnaryUnaryMultiCallable[
            pb.AcquireFirstRequest, pb.AcquireFirstResponse
        ]
        self._acquire_first_rpc = ch.unary_unary(
            _method("Breaker", "AcquireFirst"),
            request_serializer=pb.AcquireFirstRequest.SerializeToString,
            response_deserializer=pb.AcquireFirstResponse.FromString,
        )
        self._report_rpc: grpc.UnaryUnaryMultiCallable[pb.ReportRequest, pb.ReportResponse]
        self._report_rpc = ch.unary_unary(
            _method("Breaker", "Report"),
            request_serializer=pb.ReportRequest.SerializeToString,
            response_deserializer=pb.ReportResponse.FromString,
        )
        self._watch_rpc: grpc.UnaryStreamMultiCallable[pb.WatchRequest, pb.StateChange]
        self._watch_rpc = ch.unary_stream(
            _method("Breaker", "Watch"),
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.StateChange.FromString,
        )
        self._health_rpc: grpc.UnaryUnaryMultiCallable[
            health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
        ]
        self._health_rpc = ch.unary_unary(
            _HEALTH_CHECK,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        self._batch_rpc: grpc.UnaryUnaryMultiCallable[
            pb.ReportBatchRequest, pb.ReportBatchResponse
        ]
        self._batch_rpc = ch.unary_unary(
            _method("Breaker", "ReportBatch"),
            request_serializer=pb.ReportBatchRequest.SerializeToString,
            response_deserializer=pb.ReportBatchResponse.FromString,
        )

        # Reports made while breakerd is away: sent once it is back.
        self._held: HeldReports[pb.ReportRequest] = HeldReports()
        self._sidecar = SidecarPresence(
            self._health_check,
            self._away_probe_interval,
            target=self.target,
            fail_mode=self.fail_mode,
            on_back=self._on_back,
        )
        self._reports = _Health(
            "breakerd rejects or misses reports: counting them in report_errors",
            "breakerd accepts reports again",
        )
        self._batches = _Health(
            "breakerd rejects or misses batches of local decisions: sending them again",
            "breakerd accepts batches of local decisions again",
        )
        self._cache = StateCache(local_decisions=self._local_decisions)
        # Local grants, their outcomes and the decisions made without
        # breakerd, sent by the flusher's thread (a new client id in each
        # process: a forked child never sends its parent's).
        self._batch = LocalBatch(new_client_id())
        self._flusher: Optional[BatchFlusher] = BatchFlusher(
            self._batch,
            self._send_batch,
            interval=self._flush_interval,
            timeout=10 * self.decision_timeout,
            away=lambda: self._sidecar.away,
            on_dropped=lambda n: self._count("dropped_outcomes", n),
        )
        # The async path's RPCs: at most 32 on the wire (see _send_window).
        self._window = SendWindow()
        self._watch_call: Optional[grpc.Call] = None
        self._watch_thread: Optional[threading.Thread] = None
        # Guarded by _lock: a fork is coming, the Watch thread leaves grpc
        # (grpc's fork support requires that no thread of ours is in it).
        self._watch_wake = threading.Condition(self._lock)
        self._forking = False
        self._watch_parked = False
        if self._watch:
            self._watch_thread = threading.Thread(
                target=self._watch_loop, name="breakerd-watch", daemon=True
            )
            self._watch_thread.start()

    def _pause_for_fork(self) -> None:
        """Before a fork, in the forking thread: the Watch thread leaves grpc
        (its stream cancelled) and parks, and no health check is in flight,
        so no lock of grpc's is held by a thread of ours when the process is
        copied. Bounded: at most about 2 s."""
        if not self._pid or self._closed.is_set():
            return
        self._sidecar.pause()
        if self._flusher is not None:
            self._flusher.pause(2.0)
        with self._lock:
            self._forking = True
            self._watch_wake.notify_all()
            call = self._watch_call
            thread = self._watch_thread
        if thread is None:
            return
        if call is not None:
            call.cancel()
        with self._lock:
            self._watch_wake.wait_for(lambda: self._watch_parked or not thread.is_alive(), 2.0)

    def _resume_after_fork(self) -> None:
        """After a fork, in the parent: the Watch thread reconnects at once."""
        if not self._pid:
            return
        with self._lock:
            self._forking = False
            self._watch_wake.notify_all()
        self._sidecar.resume()
        if self._flusher is not None:
            self._flusher.resume()

    def _forget_parent(self) -> None:
        """In a forked child, before any other code runs: the parent's
        threads (Watch, away probe, gRPC's completion thread) do not exist
        here and its locks may be held forever, so this drops all of it,
        keeping the grpc objects referenced but unused; the first use builds
        new ones."""
        _PARENT_GRPC_OBJECTS.append(
            (self._channel, self._watch_call, self._sidecar, self._flusher)
        )
        self._lock = threading.Lock()
        closed = self._closed.is_set()
        self._closed = threading.Event()
        if closed:
            self._closed.set()
        self._window = SendWindow()  # the parent's RPCs in flight never finish here
        self._held = HeldReports()  # the parent's: the parent sends them
        self._watch_call = None
        self._watch_thread = None
        # Present, with an empty cache, until this process hears otherwise.
        self._sidecar = SidecarPresence(
            lambda: False, self._away_probe_interval, target=self.target, fail_mode=self.fail_mode
        )
        self._cache = StateCache()
        # The parent's batch is the parent's to send; this one's id is new.
        self._batch = LocalBatch(new_client_id())
        self._flusher = None
        self._pid = 0  # not connected in this process: _in_this_process connects

    def _in_this_process(self) -> None:
        """After a fork, connects the child on its first use. Raises
        RuntimeError when grpc's fork support is off: a channel opened in
        the child would hang, so refuse clearly instead."""
        if self._pid:  # unlocked fast path: set once per process
            return
        with self._lock:
            if self._pid or self._closed.is_set():
                return
            if not _fork_support_enabled():
                raise RuntimeError(
                    "breakerd Client was created before this process was forked, and "
                    "grpc's fork support is off: set GRPC_ENABLE_FORK_SUPPORT=1 in the "
                    "environment before grpc is imported, or create the Client after "
                    "the fork (e.g. in a post-fork hook)"
                )
            self._connect()
            self._pid = os.getpid()

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Send the last batch of local decisions (within
        ``decision_timeout``; what is left is dropped, counted in
        ``dropped_outcomes``), end the Watch stream and close the channel.
        Idempotent. Afterwards every call but :meth:`report` and
        :meth:`stats` raises :class:`ClientClosedError`; a report is dropped
        (counted in ``report_errors``, or for a local grant in
        ``dropped_outcomes``), and so are the reports held while breakerd
        is away."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            if self._pid:
                self._watch_wake.notify_all()
            call = self._watch_call
            connected = self._pid != 0  # else a forked child's grpc objects are its parent's
        _CLIENTS.discard(self)
        if not connected:
            return
        self._cache.grants.clear()  # no local grant from now on
        self._drop_held()
        if self._flusher is not None:  # the last batch, within decision_timeout
            self._flusher.close(self.decision_timeout)
        if call is not None:
            call.cancel()
        self._channel.close()  # also ends a health check in flight
        self._sidecar.close(timeout=2.0)
        if self._watch_thread is not None and self._watch_thread is not threading.current_thread():
            self._watch_thread.join(timeout=2.0)
        self._cache.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def wait_ready(self, timeout: float) -> bool:
        """Block until the channel to breakerd is connected, at most
        ``timeout`` seconds; True if it is. Optional: call it at startup so
        the first decisions do not fail open while the connection is set up
        (a fresh connection can take longer than ``decision_timeout``).

        Raises:
            ClientClosedError: the client is closed.
        """
        self._check_open()
        future = grpc.channel_ready_future(self._channel)
        try:
            future.result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            future.cancel()

    # -- counters and cache ------------------------------------------------

    def stats(self) -> Stats:
        """A snapshot of the counters (see :class:`Stats`)."""
        with self._lock:
            return Stats(**self._counts)

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def cached_state(self, dependency: str) -> Optional[State]:
        """The state the Watch cache holds for ``dependency``; None when the
        stream has said nothing of it (or is down, or ``watch`` is off)."""
        return self._cache.state(dependency)

    # -- the per-call protocol ---------------------------------------------

    def acquire(self, dependency: str, attempt: int = 0) -> Decision:
        """May ``dependency`` be called now? ``attempt`` is 0 for a first try,
        1, 2, ... for retries (they spend the retry budget).

        Decides in the client, with no RPC (source LOCAL), while the Watch
        cache says so: a first attempt on a closed breaker whose policy
        allows local decisions is granted (permit 0: report it with
        ``report(..., decision=d)``, which batches its outcome), and an
        enforcing breaker held open is refused. Else asks breakerd within
        ``decision_timeout``, or, while breakerd is away, decides at once
        without it. Never raises for an unreachable breakerd (FAIL_OPEN /
        FAIL_CLOSED).

        Raises:
            InvalidArgumentError: a bad dependency name.
            ClientClosedError: the client is closed (no RPC).
        """
        if attempt == 0:
            granted = self._grant_locally(dependency)
            if granted is not None:
                return granted
        decision = self._decide_without_rpc(dependency, attempt)
        if decision is not None:
            return decision
        request = pb.AcquireRequest(dependency=dependency, attempt=attempt)
        sent_at = self._sidecar.clock()
        try:
            resp = self._acquire_rpc(request, timeout=self.decision_timeout, wait_for_ready=False)
        except grpc.RpcError as err:
            return self._degraded(err, dependency, sent_at)
        except ValueError as err:  # the channel was closed since _check_open
            raise ClientClosedError() from err
        self._sidecar.answered()
        return self._decision(resp, dependency)

    def _grant_locally(self, dependency: str) -> Optional[Decision]:
        """The fast path (client/README.md, "Local decisions"): the local
        grant of a first attempt at ``dependency``, counted in the batch,
        or None to decide otherwise. No lock, no RPC, no allocation: the
        cache holds the grant's Decision only while the Watch stream is live
        and says CLOSED with local decisions allowed (it is cleared when the
        stream ends, at close, and in a forked child)."""
        try:
            decision = self._cache.grants.get(dependency)
        except TypeError:  # unhashable: not a name; the slow path says so
            return None
        if decision is None or self._sidecar.away:
            return None
        self._batch.grant(decision)
        return decision

    def _queue_outcome(self, decision: Decision, outcome: Outcome, latency: float) -> None:
        """The outcome of a call granted locally, to the batch; dropped
        (counted in dropped_outcomes) while breakerd is away, after close,
        or past 10,000 not yet acknowledged. Never blocks."""
        if self._sidecar.away or not self._batch.outcome(decision, outcome, latency):
            self._count("dropped_outcomes")

    def _decide_without_rpc(self, dependency: str, attempt: int) -> Optional[Decision]:
        """The checks of :meth:`acquire` that need no RPC: validation, local
        grant and refusal, away. None: ask breakerd. Never blocks on breakerd."""
        self._check_open()
        _check_name(dependency)
        if attempt < 0:
            raise InvalidArgumentError("attempt must be >= 0")
        if attempt == 0:
            granted = self._grant_locally(dependency)
            if granted is not None:
                return granted
        refusal = self._cache.refusal(dependency)
        if refusal is not None:
            self._count("local_rejections")
            self._batch.count_decision(dependency, REFUSED_LOCAL)
            return Decision(
                allowed=False,
                source=Source.LOCAL,
                dependency=dependency,
                state=refusal.state,
                reason=refusal.reason,
                retry_after=refusal.retry_after,
            )
        if self._sidecar.away:
            return self._failed_decision(dependency, away=True)
        return None

    def acquire_first(
        self,
        dependencies: Sequence[str],
        attempt: int = 0,
        *,
        chain: Optional[str] = None,
        first_tier: int = 0,
    ) -> Decision:
        """Acquire the first allowed of ``dependencies`` (in order of
        preference) in one round trip; ``Decision.dependency`` is the one
        granted. Dependencies the Watch cache refuses are dropped before the
        RPC; if none is left the refusal is local. When breakerd cannot
        answer, fail open grants the first remaining dependency.

        ``chain`` names a fallback chain (named like a dependency), which
        breakerd counts per tier: ``first_tier`` is the position of
        ``dependencies[0]`` in the caller's full chain (0-based; the tiers
        are 0 to 63). With a chain, every dependency is sent to breakerd,
        even those the Watch cache holds open, so that it counts the
        decision (the granted tier, or ``none``); a grant carries
        ``Decision.chain`` and ``Decision.tier``, to pass to :meth:`report`.
        While breakerd is away, or when it does not answer, the decision is
        the one made without a chain.

        Raises:
            InvalidArgumentError: an empty list, a bad name, a bad ``chain``
                or ``first_tier`` (all before any RPC).
            ClientClosedError: the client is closed (no RPC).
        """
        first = self._decide_first_without_rpc(dependencies, chain, first_tier, attempt)
        if isinstance(first, Decision):
            return first
        remaining = first
        request = pb.AcquireFirstRequest(
            dependencies=remaining, attempt=attempt, chain=chain or "", first_tier=first_tier
        )
        sent_at = self._sidecar.clock()
        try:
            resp = self._acquire_first_rpc(
                request, timeout=self.decision_timeout, wait_for_ready=False
            )
        except grpc.RpcError as err:
            return self._first_degraded(err, remaining, chain, sent_at)
        except ValueError as err:  # the channel was closed since _check_open
            raise ClientClosedError() from err
        self._sidecar.answered()
        return self._first_decision(resp, remaining, chain, first_tier)

    def _decide_first_without_rpc(
        self,
        dependencies: Sequence[str],
        chain: Optional[str],
        first_tier: int,
        attempt: int = 0,
    ) -> Union[Decision, list[str]]:
        """The checks of :meth:`acquire_first` that need no RPC: a decision,
        or the dependencies to ask breakerd about (with a chain, all of
        them). Never blocks on it."""
        self._check_open()
        deps = list(dependencies)
        if not deps:
            raise InvalidArgumentError("dependencies: at least one is required")
        for dep in deps:
            _check_name(dep)
        _check_chain(chain, first_tier, len(deps), "first_tier")
        if chain is not None and not self._sidecar.away:
            # breakerd decides, and counts, the whole chain, unless its first
            # candidate is granted locally (then the batch counts it).
            granted = None if attempt else self._grant_locally_in_chain(deps[0], chain, first_tier)
            return granted if granted is not None else deps
        first = self._skip_cached_open(deps)
        if isinstance(first, list):
            if self._sidecar.away:
                return self._failed_decision(first[0], away=True)
            if not attempt:
                granted = self._grant_locally(first[0])
                if granted is not None:
                    return granted
        return first

    def _grant_locally_in_chain(
        self, dependency: str, chain: str, tier: int
    ) -> Optional[Decision]:
        """:meth:`_grant_locally` for the first candidate of a named chain:
        the grant carries the chain and tier (the batch counts a
        ChainDecision for it, and its outcome per chain and tier)."""
        cached = self._cache.grants.get(dependency)
        if cached is None or self._sidecar.away:
            return None
        decision = dataclasses.replace(cached, chain=chain, tier=tier)
        self._batch.grant(decision)
        return decision

    def _skip_cached_open(self, deps: list[str]) -> Union[Decision, list[str]]:
        """Drops the dependencies the Watch cache refuses (counted in
        local_rejections): those left, or the local refusal if none is."""
        remaining: list[str] = []
        refusals = []
        for dep in deps:
            refusal = self._cache.refusal(dep)
            if refusal is None:
                remaining.append(dep)
            else:
                refusals.append(refusal)
                self._batch.count_decision(dep, REFUSED_LOCAL)
        if refusals:
            self._count("local_rejections", len(refusals))
        if not remaining:
            return Decision(
                allowed=False,
                source=Source.LOCAL,
                dependency=deps[-1],
                state=refusals[-1].state,
                reason=refusals[-1].reason,
                retry_after=min(r.retry_after for r in refusals),
            )
        return remaining

    def _first_decision(
        self,
        resp: pb.AcquireFirstResponse,
        sent: list[str],
        chain: Optional[str],
        first_tier: int,
    ) -> Decision:
        """breakerd's answer to an AcquireFirst of ``sent``; a grant through
        a chain carries the chain and the granted dependency's tier."""
        decision = self._decision(resp, resp.dependency or sent[-1])
        if chain is None or not decision.allowed:
            return decision
        index = sent.index(decision.dependency) if decision.dependency in sent else 0
        return dataclasses.replace(decision, chain=chain, tier=first_tier + index)

    def _first_degraded(
        self, err: grpc.RpcError, sent: list[str], chain: Optional[str], sent_at: float
    ) -> Decision:
        """:meth:`_degraded` for an AcquireFirst of ``sent``. A chain sends
        every dependency, so the decision without breakerd is then made as
        without a chain: the Watch cache's open ones skipped, the first one
        left failed open (or closed), a local refusal if none is left."""
        if chain is None:
            return self._degraded(err, sent[0], sent_at)
        self._note_unanswered(err, sent_at)
        first = self._skip_cached_open(sent)
        if isinstance(first, Decision):
            return first
        return self._failed_decision(first[0], away=False)

    def report(
        self,
        dependency: str,
        permit: int,
        outcome: Union[Outcome, OutcomeKind],
        latency: Optional[float] = None,
        *,
        chain: Optional[str] = None,
        tier: int = 0,
        decision: Optional[Decision] = None,
    ) -> None:
        """Tell breakerd how the call allowed with ``permit`` went.

        ``latency`` is the call's duration in seconds. ``chain`` and
        ``tier``: for a permit granted through a named fallback chain, the
        ``Decision.chain`` and ``Decision.tier`` of its grant (breakerd
        counts the outcome per chain and tier). A permit of 0 (a
        fail-open decision) is not sent.

        ``decision``: the Decision of the acquire being reported (its
        ``permit`` must be the one passed; its chain and tier are used).
        It is how a local grant (``Decision.local_grant``: source LOCAL,
        permit 0) is reported: its outcome is queued for the next batch
        and ``report`` returns None at once, with no RPC and no effect to
        tell (dropped, counted in ``dropped_outcomes``, while breakerd is
        away, after close, or past 10,000 outcomes not yet acknowledged).
        Without it a permit 0 sends nothing, a local grant's included.

        While breakerd is away a report of a permit is held, not sent and
        not dropped (at most 1,024 per client, past that the oldest is
        dropped and counted in ``report_errors``), and sent through the
        send window as soon as breakerd is back. Never raises for a failed
        Report: it is counted in ``report_errors`` and logged once per
        change.

        Raises:
            InvalidArgumentError: a bad ``chain``, or a ``tier`` out of 0 to
                63 or without a chain, or a ``decision`` of another
                dependency or permit (a programming error).
        """
        if decision is not None:
            if decision.dependency != dependency or decision.permit != permit:
                raise InvalidArgumentError(
                    f"decision: of {decision.dependency!r} with permit {decision.permit}, "
                    f"reported as {dependency!r} with permit {permit}"
                )
            if decision.local_grant:
                if not isinstance(outcome, Outcome):
                    outcome = Outcome.of(outcome)
                self._queue_outcome(decision, outcome, latency or 0.0)
                return
            if chain is None and not tier:
                chain, tier = decision.chain, decision.tier
        _check_chain(chain, tier, 1, "tier")
        if not permit or not self._may_send_report():
            return
        request = _report_request(dependency, permit, outcome, latency, chain, tier)
        if self._sidecar.away:
            self._hold(request)
            return
        try:
            self._report_rpc(request, timeout=self.decision_timeout, wait_for_ready=False)
        except grpc.RpcError as err:
            self._report_failed(err)
        except ValueError:  # the channel was closed under us
            self._report_failed(None)
        else:
            self._report_ok()

    def _may_send_report(self) -> bool:
        """Whether a Report may be sent (breakerd away or not); if not
        (closed, a forked child that cannot connect) it is counted in
        report_errors."""
        try:
            self._check_open()
        except RuntimeError:  # ClientClosedError, or the forked child's error
            self._count("report_errors")
            return False
        return True

    def _hold(self, request: pb.ReportRequest) -> None:
        """Holds a Report made while breakerd is away (not an error), to be
        sent once it is back; the oldest held one dropped past 1,024 is
        counted in report_errors."""
        if self._held.hold(request):
            self._count("report_errors")
        # breakerd came back, or the client was closed, while this was held:
        # nobody else would send or drop it.
        if self._closed.is_set():
            self._drop_held()
        elif not self._sidecar.away:
            self._send_held()

    def _send_held(self) -> None:
        """breakerd is back: sends the Reports held while it was away
        through the send window (reports first), without waiting for them;
        called in the thread that found it back (the away probe's or the
        Watch stream's), never an unrelated caller's."""
        for request in self._held.take():
            self._send_report(request, lambda: None)

    def _drop_held(self) -> None:
        """The client is closed: the Reports held are dropped, counted."""
        dropped = len(self._held.take())
        if dropped:
            self._count("report_errors", dropped)

    def _on_back(self) -> None:
        """breakerd answers again (the away probe's or the Watch stream's
        thread): the reports held go out, and the batch, with the decisions
        counted meanwhile."""
        self._send_held()
        if self._flusher is not None:
            self._flusher.wake()

    def _send_batch(self, request: pb.ReportBatchRequest, timeout: float) -> Sent:
        """One ReportBatch RPC (the flusher's thread); never raises."""
        try:
            self._batch_rpc(request, timeout=timeout, wait_for_ready=False)
        except grpc.RpcError as err:
            code = _code(err)
            if code in _ANSWER_CODES:
                self._sidecar.note_answer()
            self._batches.failed(_describe(err))
            # breakerd will never take it as it is: the request was invalid
            # (a bug), or this breakerd has no ReportBatch.
            if code in (
                grpc.StatusCode.INVALID_ARGUMENT,
                grpc.StatusCode.UNIMPLEMENTED,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
            ):
                return Sent.DROP
            return Sent.RETRY
        except ValueError:  # the channel was closed
            return Sent.RETRY
        self._sidecar.note_answer()
        self._batches.ok()
        return Sent.OK

    def _report_ok(self) -> None:
        self._sidecar.note_answer()
        self._reports.ok()

    def _report_failed(self, err: Optional[grpc.RpcError]) -> None:
        self._count("report_errors")
        if err is not None:
            if _code(err) in _ANSWER_CODES:
                self._sidecar.note_answer()
            self._reports.failed(_describe(err))

    # -- guards and helpers ------------------------------------------------

    def guard(self, dependency: str, attempt: int = 0) -> Guard:
        """A context manager around one call to ``dependency``::

            with client.guard("payments/api") as g:
                resp = session.post(url)
                g.set_http_status(resp.status_code)

        Entering acquires; a refusal raises :class:`BreakerOpenError` and the
        block does not run. Leaving reports, with the block's latency: the
        outcome set on the guard, else the exception classified (and re-raised),
        else success.
        """
        return _new_guard(Guard, self, dependency, attempt)

    def guard_async(self, dependency: str, attempt: int = 0) -> AsyncGuard:
        """:meth:`guard` for ``async with``. The event loop never blocks on
        breakerd: decisions that need no RPC (local refusal, sidecar away)
        are made at once, and RPCs are started without blocking it and
        answered from gRPC's completion thread (no executor). At most 32
        RPCs of the async path are on the wire at once; the others wait
        their turn, and the ``decision_timeout`` of each runs from when it
        is sent; while breakerd is away the waiting decisions are answered
        at once from the fail mode, and reports are held until it is back
        (see :meth:`report`). A task cancelled while its acquire is in
        flight gets its CancelledError at once, and the permit, once it
        arrives, is reported CANCELLED."""
        return _new_guard(AsyncGuard, self, dependency, attempt)

    def guarded(self, dependency: str) -> Callable[[_F], _F]:
        """Decorator: every call of the function runs inside :meth:`guard`
        (:meth:`guard_async` for a coroutine function).

        Raises:
            TypeError: for a generator or async generator function, whose
                call only creates the generator: guard each call it makes
                with ``with client.guard(...)`` / ``async with
                client.guard_async(...)`` inside it instead.
        """

        def decorate(fn: _F) -> _F:
            if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
                if inspect.isasyncgenfunction(fn):
                    kind, guard = "async generator", "async with client.guard_async"
                else:
                    kind, guard = "generator", "with client.guard"
                raise TypeError(
                    f"@guarded cannot guard the {kind} function {fn.__qualname__}: calling it "
                    f"only creates the {kind}; use `{guard}({dependency!r})` around each "
                    f"call inside it"
                )
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    guard = AsyncGuard(self, dependency, 0)
                    await guard.__aenter__()
                    return await guard._call_async(
                        functools.partial(fn, *args, **kwargs), "@guarded on a plain function"
                    )

                return cast(_F, run_async)

            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                guard = Guard(self, dependency, 0)
                guard.__enter__()
                return guard._call(
                    functools.partial(fn, *args, **kwargs),
                    "@guarded on an `async def` function, which it awaits",
                )

            return cast(_F, run)

        return decorate

    def retry(
        self,
        dependency: str,
        fn: Callable[[], _T],
        *,
        max_attempts: int = 3,
        base: float = 0.1,
        max_backoff: float = 2.0,
    ) -> _T:
        """Call ``fn`` guarded, retrying failures worth retrying.

        Before attempt n >= 1 it sleeps ``uniform(0, min(max_backoff,
        base * 2**(n-1)))`` and acquires with ``attempt=n`` (so the retry budget
        applies). Any refusal stops at once with :class:`BreakerOpenError`
        (chained to the last failure); an outcome not worth retrying (bad
        request, auth error, cancelled, soft failure) or the last attempt
        re-raises the call's error, and an error of the classifier is raised
        at once.

        Raises:
            TypeError: ``fn`` is a coroutine function, or returned an
                awaitable (closed unrun, its permit reported CANCELLED): use
                :meth:`retry_async`.
            ClientClosedError: the client is closed.
        """
        _refuse_coroutine_function(fn, "retry", "retry_async")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        last_error: Optional[BaseException] = None
        for attempt in range(max_attempts):
            if attempt:
                time.sleep(_backoff(attempt, base, max_backoff))
            decision = self.acquire(dependency, attempt)
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = Guard(self, dependency, attempt)
            guard._admit(decision)
            try:
                return guard._call(fn, "`await client.retry_async(...)`")
            except _MismatchError:
                raise
            except Exception as exc:
                if attempt + 1 == max_attempts or not _worth_another_try(guard):
                    raise
                last_error = exc
        raise AssertionError("unreachable")

    async def retry_async(
        self,
        dependency: str,
        fn: Callable[[], Awaitable[_T]],
        *,
        max_attempts: int = 3,
        base: float = 0.1,
        max_backoff: float = 2.0,
    ) -> _T:
        """:meth:`retry` for an async ``fn`` (``await fn()`` is the call):
        the same attempts, backoff (``asyncio.sleep``) and stopping rules;
        the event loop never blocks on breakerd (see :meth:`guard_async`).

        Raises:
            TypeError: ``fn()`` returned something not awaitable: use
                :meth:`retry`.
        """
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        last_error: Optional[BaseException] = None
        for attempt in range(max_attempts):
            if attempt:
                await asyncio.sleep(_backoff(attempt, base, max_backoff))
            decision = await self._acquire_async(dependency, attempt)
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = AsyncGuard(self, dependency, attempt)
            guard._admit(decision)
            try:
                return await guard._call_async(fn, "client.retry(...)")
            except _MismatchError:
                raise
            except Exception as exc:
                if attempt + 1 == max_attempts or not _worth_another_try(guard):
                    raise
                last_error = exc
        raise AssertionError("unreachable")

    def first(
        self,
        dependencies: Sequence[str],
        fn: Callable[[str], _T],
        *,
        chain: Optional[str] = None,
    ) -> _T:
        """A fallback chain: call ``fn(dependency)`` for the first dependency
        breakerd grants (AcquireFirst), guarded. If that call fails with an
        outcome worth retrying (timeout, connection or server error, rate
        limited), go on with the dependencies after it; any other failure
        (bad request, auth error, cancelled, soft failure) stops the chain
        with the call's error (a classifier's error stops it too). Raises
        :class:`BreakerOpenError` when none is granted, or the last call's
        error when every granted one failed.

        ``chain`` names the chain (named like a dependency) for breakerd to
        count: each AcquireFirst then carries every remaining dependency,
        even those the Watch cache holds open, with the chain's name and
        the tier of the first one (its position in ``dependencies``), so
        breakerd counts each decision by tier, or ``none`` when it refuses
        them all; each call's report carries its tier. Without a name the
        dependencies the cache holds open are skipped with no RPC. While
        breakerd is away, or does not answer, the chain goes on as without
        a name.

        Raises:
            InvalidArgumentError: an empty list, a bad dependency name or a
                bad ``chain`` (before any RPC).
            TypeError: ``fn`` is a coroutine function, or returned an
                awaitable (closed unrun, its permit reported CANCELLED): use
                :meth:`first_async`.
            ClientClosedError: the client is closed.
        """
        _refuse_coroutine_function(fn, "first", "first_async")
        remaining, tier = list(dependencies), 0  # tier: of remaining[0] in the chain
        last_error: Optional[Exception] = None
        while True:
            decision = self.acquire_first(
                remaining, chain=chain, first_tier=tier if chain is not None else 0
            )
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = Guard(self, decision.dependency, 0)
            guard._admit(decision)
            try:
                return guard._call(
                    functools.partial(fn, decision.dependency), "`await client.first_async(...)`"
                )
            except _MismatchError:
                raise
            except Exception as exc:
                remaining, tier = _after(remaining, tier, decision.dependency)
                if not remaining or not _worth_another_try(guard):
                    raise
                last_error = exc

    async def first_async(
        self,
        dependencies: Sequence[str],
        fn: Callable[[str], Awaitable[_T]],
        *,
        chain: Optional[str] = None,
    ) -> _T:
        """:meth:`first` for an async ``fn`` (``await fn(dependency)`` is the
        call): the same chain, ``chain`` name and stopping rules; the event
        loop never blocks on breakerd.

        Raises:
            InvalidArgumentError: as :meth:`first`.
            TypeError: ``fn(dependency)`` returned something not awaitable:
                use :meth:`first`.
        """
        remaining, tier = list(dependencies), 0  # tier: of remaining[0] in the chain
        last_error: Optional[Exception] = None
        while True:
            decision = await self._acquire_first_async(
                remaining, chain, tier if chain is not None else 0
            )
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = AsyncGuard(self, decision.dependency, 0)
            guard._admit(decision)
            try:
                return await guard._call_async(
                    functools.partial(fn, decision.dependency), "client.first(...)"
                )
            except _MismatchError:
                raise
            except Exception as exc:
                remaining, tier = _after(remaining, tier, decision.dependency)
                if not remaining or not _worth_another_try(guard):
                    raise
                last_error = exc

    # -- the async path ----------------------------------------------------
    #
    # No thread of the client blocks for the event loop. Each RPC is started
    # with gRPC's future API, from the loop or from gRPC's completion thread
    # when a slot of the send window frees (so its deadline, decision_timeout,
    # runs from when its turn comes), and answered from that thread through
    # loop.call_soon_threadsafe. (The deadline is gRPC's own: a timer on the
    # loop would fire before gRPC's completion thread, waiting for the GIL
    # behind a burst of tasks, could hand over answers that came in time.)

    async def _acquire_async(self, dependency: str, attempt: int) -> Decision:
        """:meth:`acquire` for the event loop (see :meth:`guard_async`)."""
        decision = self._decide_without_rpc(dependency, attempt)
        if decision is not None:
            return decision
        return await self._decide_async(
            lambda: self._decide_without_rpc(dependency, attempt),
            lambda: self._acquire_rpc.future(
                pb.AcquireRequest(dependency=dependency, attempt=attempt),
                timeout=self.decision_timeout,
                wait_for_ready=False,
            ),
            lambda resp: self._decision(resp, dependency),
            lambda err, sent_at: self._degraded(err, dependency, sent_at),
        )

    async def _acquire_first_async(
        self, dependencies: Sequence[str], chain: Optional[str], first_tier: int
    ) -> Decision:
        """:meth:`acquire_first` (attempt 0) for the event loop."""
        first = self._decide_first_without_rpc(dependencies, chain, first_tier)
        if isinstance(first, Decision):
            return first
        remaining = first

        def recheck() -> Optional[Decision]:
            again = self._decide_first_without_rpc(remaining, chain, first_tier)
            return again if isinstance(again, Decision) else None

        return await self._decide_async(
            recheck,
            lambda: self._acquire_first_rpc.future(
                pb.AcquireFirstRequest(
                    dependencies=remaining, attempt=0, chain=chain or "", first_tier=first_tier
                ),
                timeout=self.decision_timeout,
                wait_for_ready=False,
            ),
            lambda resp: self._first_decision(resp, remaining, chain, first_tier),
            lambda err, sent_at: self._first_degraded(err, remaining, chain, sent_at),
        )

    async def _decide_async(
        self,
        recheck: Callable[[], Optional[Decision]],
        send: Callable[[], Any],
        decide: Callable[[Any], Decision],
        degraded: Callable[[grpc.RpcError, float], Decision],
    ) -> Decision:
        """Sends one decision RPC through the send window and awaits its
        answer. ``recheck`` decides without an RPC if that became possible
        while waiting for a slot (away, closed, refused locally); ``send``
        starts the RPC (a grpc future); ``decide`` makes its response a
        Decision; ``degraded(error, sent_at)`` is the decision when the RPC
        fails (see :meth:`_degraded`).

        A task cancelled meanwhile gets its CancelledError at once, but the
        RPC is not cancelled with it (breakerd may already hold the request):
        a permit granted anyway is reported CANCELLED when it arrives, so
        none is lost (a lost probe permit would refuse the dependency
        PROBE_IN_FLIGHT until its lease ends)."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Decision] = loop.create_future()
        handoff = _Handoff()
        sent_at = 0.0  # when the RPC is written (set by start)

        def start(waited: bool) -> bool:
            nonlocal sent_at
            if answer.cancelled():  # the caller gave up while waiting
                return False
            try:
                early = recheck() if waited else None
                if early is not None:
                    self._answer(loop, answer, early, None)
                    return False
                sent_at = self._sidecar.clock()
                call = send()
            except ValueError as err:  # the channel was closed meanwhile
                if isinstance(err, InvalidArgumentError):
                    self._answer(loop, answer, None, err)
                else:
                    self._answer(loop, answer, None, ClientClosedError())
                return False
            except Exception as err:  # ClientClosedError, the fork's RuntimeError
                self._answer(loop, answer, None, err)
                return False
            call.add_done_callback(finished)
            return True

        def drop() -> None:  # breakerd was marked away while this waited
            if answer.cancelled():
                return
            try:
                early = recheck()
            except Exception as err:  # ClientClosedError
                self._answer(loop, answer, None, err)
                return
            if early is None:  # back meanwhile: wait for a slot again
                self._window.submit_decision(start, drop)
            else:
                self._answer(loop, answer, early, None)

        def finished(call: Any) -> None:  # gRPC's completion thread
            decision: Optional[Decision] = None
            error: Optional[BaseException] = None
            try:
                try:
                    decision = decide(call.result())
                    self._sidecar.answered()
                except grpc.RpcError as err:
                    decision = degraded(err, sent_at)
                except grpc.FutureCancelledError:
                    error = ClientClosedError()
            except Exception as err:  # from degraded: invalid argument, closed
                error = err
            finally:
                self._window.done()
            self._answer(loop, answer, decision, error, handoff)

        self._window.submit_decision(start, drop)
        try:
            return await answer
        except asyncio.CancelledError:
            # The task gave up: a permit on its way (handed over, not yet
            # settled on the loop, which may close before it runs) or
            # settled after the task was cancelled is reported here, once.
            left = handoff.give_up()
            if left is not None:
                self._abandon(left)
            elif answer.done() and not answer.cancelled() and answer.exception() is None:
                self._abandon(answer.result())
            raise

    def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        answer: asyncio.Future[Decision],
        decision: Optional[Decision],
        error: Optional[BaseException],
        handoff: Optional[_Handoff] = None,
    ) -> None:
        """Hands a decision (or error) to the task awaiting ``answer``, from
        any thread; if the task gave up (cancelled) or its loop is gone, the
        decision's permit is reported CANCELLED instead. ``handoff`` (for a
        decision from breakerd, which may carry a permit) makes that exactly
        once even when the loop closes between scheduling and running the
        settlement, as ``asyncio.run`` does once its main coroutine ends."""
        if handoff is not None and decision is not None and not handoff.hand_over(decision):
            self._abandon(decision)  # the task has given up already
            return

        def settle() -> None:
            if handoff is not None and decision is not None and handoff.take() is None:
                return  # the cancelled task reported it
            if answer.done():
                if decision is not None:
                    self._abandon(decision)
            elif error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(cast(Decision, decision))

        if not _on_loop(loop, settle) and decision is not None:
            # The loop is closed: nobody waits any more.
            if handoff is None or handoff.take() is not None:
                self._abandon(decision)

    def _abandon(self, decision: Decision) -> None:
        """Reports the permit of a decision its caller gave up on as
        CANCELLED (sent even while breakerd is away: it answered that RPC)."""
        if decision.allowed and decision.permit:
            request = _report_request(
                decision.dependency,
                decision.permit,
                OutcomeKind.CANCELLED,
                None,
                decision.chain,
                decision.tier,
            )
            self._send_report(request, lambda: None, keep=True)

    async def _report_async(self, request: pb.ReportRequest) -> None:
        """:meth:`report` for the event loop: sent through the send window,
        awaited until it is done (a cancellation meanwhile does not stop it)."""
        if not request.permit:
            return
        loop = asyncio.get_running_loop()
        sent: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not sent.done():
                sent.set_result(None)

        def notify() -> None:
            _on_loop(loop, settle)

        self._send_report(request, notify)
        await asyncio.shield(sent)

    def _send_report(
        self, request: pb.ReportRequest, notify: Callable[[], None], keep: bool = False
    ) -> None:
        """Sends a Report through the send window, never blocking; counts
        its failure; calls ``notify()`` once it is done, whatever happened.
        ``keep``: sent even while breakerd is away, and not dropped when the
        window is flushed; otherwise held while breakerd is away (see
        :meth:`report`)."""

        def start(waited: bool) -> bool:
            if not self._may_send_report():  # counted
                notify()
                return False
            if not keep and self._sidecar.away:
                self._hold(request)
                notify()
                return False
            try:
                call = self._report_rpc.future(
                    request, timeout=self.decision_timeout, wait_for_ready=False
                )
            except ValueError:  # the channel was closed meanwhile
                self._report_failed(None)
                notify()
                return False
            call.add_done_callback(finished)
            return True

        def finished(call: Any) -> None:
            try:
                call.result()
            except grpc.RpcError as err:
                self._report_failed(err)
            except grpc.FutureCancelledError:
                self._report_failed(None)
            else:
                self._report_ok()
            finally:
                self._window.done()
                notify()

        def drop() -> None:  # breakerd was marked away while this waited: held
            self._hold(request)
            notify()

        self._window.submit_report(start, None if keep else drop)

    # -- internals ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise ClientClosedError()
        self._in_this_process()

    def _classify(self, exc: BaseException) -> Outcome:
        if self._classifier is not None:
            outcome = self._classifier(exc)
            if outcome is not None:
                return outcome
        return Outcome.from_exception(exc)

    def _decision(
        self, resp: Union[pb.AcquireResponse, pb.AcquireFirstResponse], dependency: str
    ) -> Decision:
        return Decision(
            allowed=resp.allowed,
            source=Source.SIDECAR,
            dependency=dependency,
            permit=resp.permit,
            probe=resp.probe,
            state=enum_value(State, resp.state, State.UNSPECIFIED),
            reason=enum_value(RejectReason, resp.reason, RejectReason.UNSPECIFIED),
            retry_after=_seconds(resp.retry_after),
        )

    def _degraded(self, err: grpc.RpcError, dependency: str, sent_at: float) -> Decision:
        """The decision when a decision RPC sent at ``sent_at`` (the
        presence's clock) failed with ``err``: ``dependency`` failed open
        (or closed), after :meth:`_note_unanswered`.

        Raises:
            InvalidArgumentError: breakerd says the request is invalid.
            ClientClosedError: because the client was closed.
        """
        self._note_unanswered(err, sent_at)
        return self._failed_decision(dependency, away=False)

    def _note_unanswered(self, err: grpc.RpcError, sent_at: float) -> None:
        """Takes in that a decision RPC sent at ``sent_at`` (the presence's
        clock) failed with ``err``.

        breakerd is marked away when it is UNAVAILABLE, or when the RPC hit
        its deadline while breakerd answered no other RPC of this client
        after it was sent (hung, stopped, throttled). A DEADLINE_EXCEEDED
        while breakerd goes on answering others is one late answer (a loaded
        machine delays a process by tens of milliseconds now and then): that
        decision alone fails open, and the next ones still ask breakerd.

        Raises:
            InvalidArgumentError: breakerd says the request is invalid.
            ClientClosedError: because the client was closed.
        """
        code = _code(err)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            self._sidecar.answered()
            raise InvalidArgumentError(_details(err)) from err
        if code in _ANSWER_CODES:
            self._sidecar.note_answer()
        detail = _describe(err)
        away = code == grpc.StatusCode.UNAVAILABLE
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            away = not self._sidecar.answered_since(sent_at)
            if not away:
                detail += " (late: it answered other calls meanwhile, so it is not marked away)"
        if self._closed.is_set():
            raise ClientClosedError()
        self._sidecar.failed(detail, away=away)
        if self._sidecar.away:  # the async path's waiting callers: answered at once
            self._window.flush()

    def _failed_decision(self, dependency: str, away: bool) -> Decision:
        """FAIL_OPEN or FAIL_CLOSED, counted; ``away``: decided with no RPC."""
        allowed = self.fail_mode == "open"
        with self._lock:
            self._counts["fail_open" if allowed else "fail_closed"] += 1
            if away:
                self._counts["away_decisions"] += 1
        self._batch.count_decision(dependency, FAIL_OPEN if allowed else FAIL_CLOSED)
        return Decision(
            allowed=allowed,
            source=Source.FAIL_OPEN if allowed else Source.FAIL_CLOSED,
            dependency=dependency,
        )

    def _health_check(self) -> bool:
        """The away probe: True if breakerd's health service says SERVING.

        Sent wait-for-ready, bounded by its deadline (decision_timeout), as
        the C++ client does: a Check that fails at once on a channel still
        reconnecting would find a restarted breakerd only at the next probe
        after the connection is up; this one goes out as soon as it is."""
        try:
            resp = self._health_rpc(
                health_pb2.HealthCheckRequest(service=""),
                timeout=self.decision_timeout,
                wait_for_ready=True,
            )
        except grpc.RpcError as err:
            _log.debug("breakerd health check: %s", _describe(err))
            return False
        except ValueError:  # the channel was closed
            return False
        return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)

    def _watch_loop(self) -> None:
        """Runs in the watch thread until close(): keeps one Watch stream
        (every dependency) feeding the cache; clears the cache whenever the
        stream ends, and reconnects with full-jitter backoff."""
        failures = 0
        reconnecting = False
        while not self._closed.is_set():
            with self._lock:
                self._park_while_forking()
                if self._closed.is_set():
                    return
                if reconnecting:
                    self._counts["watch_reconnects"] += 1
                try:
                    call = self._watch_rpc(pb.WatchRequest(), wait_for_ready=False)
                except ValueError:  # channel closed
                    return
                self._watch_call = call
            reconnecting = True
            started = time.monotonic()
            healthy = False
            try:
                for change in call:
                    self._sidecar.back()
                    self._cache.apply(
                        change.dependency,
                        enum_value(State, change.state, State.UNSPECIFIED),
                        _seconds(change.retry_after),
                        change.generation,
                        change.mode,
                        change.local_decisions,
                        change.reason,
                    )
                    healthy = True
            except grpc.RpcError as err:
                if not self._closed.is_set():
                    _log.debug("breakerd watch stream ended: %s", _describe(err))
            except Exception:  # never let the thread die: drop the cache, reconnect
                if not self._closed.is_set():
                    _log.exception("breakerd watch stream failed")
            finally:
                self._cache.clear()
            if healthy or time.monotonic() - started >= self._backoff_max:
                failures = 0
            failures += 1
            cap = min(self._backoff_max, self._backoff_first * 2 ** (failures - 1))
            with self._lock:
                if not self._forking:  # else reconnect at once after the fork
                    self._watch_wake.wait_for(
                        lambda: self._closed.is_set() or self._forking, random.uniform(0, cap)
                    )

    def _park_while_forking(self) -> None:
        """In the Watch thread, outside grpc, until the fork is done.
        REQUIRES: _lock held."""
        if not self._forking:
            return
        self._watch_parked = True
        self._watch_wake.notify_all()
        self._watch_wake.wait_for(lambda: not self._forking or self._closed.is_set())
        self._watch_parked = False


class _GuardBase:
    """What :class:`Guard` and :class:`AsyncGuard` share. One guard covers
    one call and reports its permit exactly once; not meant to be shared
    between threads."""

    # Class-level defaults, shadowed per guard once set: a guard is made per
    # call, and the local fast path sets only what it must.
    decision: Optional[Decision] = None
    """The acquire's answer, once entered."""
    outcome: Optional[Outcome] = None
    """The outcome reported, once left."""
    _explicit: Optional[Outcome] = None
    _started = 0.0
    _classifier_failed = False  # the error raised is the classifier's

    def __init__(self, client: Client, dependency: str, attempt: int) -> None:
        self._client = client
        self.dependency = dependency
        self.attempt = attempt

    @property
    def permit(self) -> int:
        """The permit to report (0 before entering or when failed open)."""
        return self.decision.permit if self.decision else 0

    def set_outcome(self, outcome: Union[Outcome, OutcomeKind]) -> None:
        """Report ``outcome`` on leaving, whatever happens in the block."""
        self._explicit = outcome if isinstance(outcome, Outcome) else Outcome.of(outcome)

    def set_http_status(
        self, status: int, retry_after_header: Union[str, int, float, None] = None
    ) -> None:
        """Report this HTTP status (and Retry-After) on leaving."""
        self._explicit = Outcome.from_http_status(status, retry_after_header)

    def set_grpc_code(self, code: Union[grpc.StatusCode, int]) -> None:
        """Report this gRPC status code on leaving."""
        self._explicit = Outcome.from_grpc_code(code)

    def _admit(self, decision: Decision) -> None:
        """Take the acquire's answer: raise if refused, else start the clock."""
        self.decision = decision
        if not decision.allowed:
            raise BreakerOpenError(decision)
        self._started = _monotonic()

    def _call(self, fn: Callable[[], _T], instead: str) -> _T:
        """Run ``fn()`` as the admitted call, report it, re-raise its error.
        An awaitable result means the call was not made: it is closed unrun,
        reported CANCELLED (neutral) and refused with a TypeError naming
        ``instead``."""
        try:
            result = fn()
        except BaseException as exc:
            self._finish(exc)
            raise
        if inspect.isawaitable(result):
            _discard(result)
            self._explicit = Outcome.CANCELLED
            self._finish(None)
            raise _MismatchError(
                f"{_name(fn)} returned {type(result).__name__}, an awaitable, which was "
                f"not run: use {instead}"
            )
        self._finish(None)
        return result

    def _check_fresh(self) -> None:
        if self.decision is not None:
            raise RuntimeError("a breakerd guard covers one call; make a new one")

    def _finish(self, exc: Optional[BaseException]) -> None:
        """Report once: the explicit outcome, else ``exc`` classified, else
        success (see :meth:`_settle`)."""
        if self.outcome is not None or self.decision is None:
            return
        outcome, classifier_error = self._settle(exc)
        decision = self.decision
        if decision.source is _LOCAL:  # a local grant (a refusal never gets here)
            self._client._queue_outcome(decision, outcome, self._latency())
        else:
            self._client.report(
                self.dependency,
                decision.permit,
                outcome,
                self._latency(),
                chain=decision.chain,
                tier=decision.tier,
            )
        self._raise_classifier_error(classifier_error)

    def _settle(self, exc: Optional[BaseException]) -> Tuple[Outcome, Optional[BaseException]]:
        """Fixes the outcome to report: the explicit one, else ``exc``
        classified, else success; and the classifier's error, if it raised.
        A classifier that raises does not leave the permit unreported: the
        report carries what :meth:`Outcome.from_exception` (the default
        classifier) makes of ``exc``, then the classifier's error is raised
        (:meth:`_raise_classifier_error`)."""
        classifier_error: Optional[BaseException] = None
        if self._explicit is not None:
            outcome = self._explicit
        elif exc is None:
            outcome = Outcome.SUCCESS
        else:
            try:
                outcome = self._client._classify(exc)
            except BaseException as err:  # the caller's classifier failed
                outcome = Outcome.from_exception(exc)
                classifier_error = err
        self.outcome = outcome
        return outcome, classifier_error

    def _latency(self) -> float:
        return _monotonic() - self._started

    def _raise_classifier_error(self, error: Optional[BaseException]) -> None:
        if error is not None:
            self._classifier_failed = True
            raise error


class Guard(_GuardBase):
    """A context manager guarding one call; see :meth:`Client.guard`."""

    def __enter__(self) -> Guard:
        if self.decision is None and not self.attempt:
            # Client._grant_locally, inlined: the local fast path.
            client = self._client
            try:
                decision = client._cache.grants.get(self.dependency)
            except TypeError:  # unhashable: not a name; acquire says so
                decision = None
            if decision is not None and not client._sidecar.away:
                client._batch.grant(decision)
                self.decision = decision
                self._started = _monotonic()
                return self
        self._check_fresh()
        self._admit(self._client.acquire(self.dependency, self.attempt))
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        decision = self.decision
        if (
            exc is None
            and decision is not None
            and decision.source is _LOCAL
            and self._explicit is None
            and self.outcome is None
        ):  # a local grant's success: _finish and Client._queue_outcome, inlined
            self.outcome = _SUCCESS
            client = self._client
            if client._sidecar.away or not client._batch.outcome(
                decision, _SUCCESS, _monotonic() - self._started
            ):
                client._count("dropped_outcomes")
            return
        self._finish(exc)


class AsyncGuard(_GuardBase):
    """An async context manager guarding one call; see :meth:`Client.guard_async`."""

    async def __aenter__(self) -> AsyncGuard:
        self._check_fresh()
        self._admit(await self._client._acquire_async(self.dependency, self.attempt))
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self._leave(exc)

    async def _call_async(self, fn: Callable[[], Awaitable[_T]], instead: str) -> _T:
        """:meth:`_call` for an async call: ``await fn()``. A result that is
        not awaitable is reported CANCELLED and refused with a TypeError
        naming ``instead``."""
        try:
            awaitable: object = fn()
            if not inspect.isawaitable(awaitable):
                raise _MismatchError(
                    f"{_name(fn)} returned {type(awaitable).__name__}, not an awaitable: "
                    f"use {instead}"
                )
            result = cast(_T, await awaitable)
        except _MismatchError:
            self._explicit = Outcome.CANCELLED
            await self._leave(None)
            raise
        except BaseException as exc:
            await self._leave(exc)
            raise
        await self._leave(None)
        return result

    async def _leave(self, exc: Optional[BaseException]) -> None:
        """:meth:`_finish` for the event loop: at once when no RPC is needed,
        else through the client's send window, never blocking the loop; a
        cancellation while reporting does not lose the report."""
        if self.outcome is not None or self.decision is None:
            return
        if not self.decision.permit or self._client._sidecar.away:
            self._finish(exc)  # sends nothing now (held while away)
            return
        outcome, classifier_error = self._settle(exc)
        await self._client._report_async(
            _report_request(
                self.dependency,
                self.decision.permit,
                outcome,
                self._latency(),
                self.decision.chain,
                self.decision.tier,
            )
        )
        self._raise_classifier_error(classifier_error)


_G = TypeVar("_G", bound=_GuardBase)


def _new_guard(kind: type[_G], client: Client, dependency: str, attempt: int) -> _G:
    """``kind(client, dependency, attempt)`` without calling the class
    (about 0.2 us less: a guard is made per call)."""
    guard = _object_new(kind)
    guard._client = client
    guard.dependency = dependency
    guard.attempt = attempt
    return guard


_object_new = object.__new__


class _MismatchError(TypeError):
    """A sync helper got an async call, or an async helper a sync one."""


def _refuse_coroutine_function(fn: Callable[..., Any], helper: str, instead: str) -> None:
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"{helper}() got the async function {_name(fn)}: calling it only creates a "
            f"coroutine, which {helper}() would never run; use `await client.{instead}(...)`"
        )


def _discard(awaitable: Awaitable[Any]) -> None:
    """Drops an awaitable that will not be awaited, without a 'never awaited' warning."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


def _name(fn: Callable[..., Any]) -> str:
    target = fn.func if isinstance(fn, functools.partial) else fn
    return str(getattr(target, "__qualname__", None) or repr(target))


def _worth_another_try(guard: _GuardBase) -> bool:
    """After a guarded call of retry/first raised: whether its outcome is
    worth another attempt (timeout, connection or server error, rate
    limited; not bad request, auth error, cancelled, soft failure), and the
    error is the call's own, not its classifier's."""
    assert guard.outcome is not None
    return guard.outcome.retryable and not guard._classifier_failed


def _backoff(attempt: int, base: float, max_backoff: float) -> float:
    """Full jitter before attempt ``attempt`` >= 1."""
    return random.uniform(0, min(max_backoff, base * 2 ** (attempt - 1)))


def _after(remaining: list[str], tier: int, granted: str) -> Tuple[list[str], int]:
    """The fallback chain's candidates after ``granted`` failed, and the
    tier of the first of them (``tier`` is that of ``remaining[0]``)."""
    index = remaining.index(granted) if granted in remaining else 0
    return remaining[index + 1 :], tier + index + 1


class _Handoff:
    """A decision from breakerd on its way from gRPC's completion thread to
    the task awaiting it. Exactly one side ends up with it: the loop's
    settlement (``take``), or the task that gave up (``give_up``), or the
    sender when the task had given up first (``hand_over`` is False)."""

    __slots__ = ("_lock", "_decision", "_gone")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decision: Optional[Decision] = None
        self._gone = False

    def hand_over(self, decision: Decision) -> bool:
        """Leaves ``decision`` for the task; False if it has given up."""
        with self._lock:
            if self._gone:
                return False
            self._decision = decision
            return True

    def take(self) -> Optional[Decision]:
        """The decision handed over, once (None if the task took it)."""
        with self._lock:
            decision, self._decision = self._decision, None
            return decision

    def give_up(self) -> Optional[Decision]:
        """The task is cancelled: returns a decision handed over but not
        yet settled (its permit is the task's to report), once."""
        with self._lock:
            self._gone = True
            decision, self._decision = self._decision, None
            return decision


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> bool:
    """Runs ``fn()`` on ``loop`` soon, from any thread; False if the loop is
    closed (then nobody there waits any more)."""
    try:
        loop.call_soon_threadsafe(fn)
        return True
    except RuntimeError:
        return False


def _report_request(
    dependency: str,
    permit: int,
    outcome: Union[Outcome, OutcomeKind],
    latency: Optional[float],
    chain: Optional[str] = None,
    tier: int = 0,
) -> pb.ReportRequest:
    if not isinstance(outcome, Outcome):
        outcome = Outcome.of(outcome)
    request = pb.ReportRequest(
        dependency=dependency,
        permit=permit,
        outcome=_PB_OUTCOME[outcome.kind],
        http_status=outcome.http_status,
        chain=chain or "",
        tier=tier if chain else 0,
    )
    if outcome.grpc_code is not None:
        request.grpc_code = outcome.grpc_code
    if latency is not None:
        request.latency.FromNanoseconds(max(0, int(latency * 1e9)))
    if outcome.retry_after is not None:
        request.retry_after.FromNanoseconds(int(outcome.retry_after * 1e9))
    return request


def _code(err: grpc.RpcError) -> Optional[grpc.StatusCode]:
    code = getattr(err, "code", None)
    return code() if callable(code) else None


def _details(err: grpc.RpcError) -> str:
    details = getattr(err, "details", None)
    return str(details()) if callable(details) else str(err)


def _describe(err: grpc.RpcError) -> str:
    code = _code(err)
    return f"{code.name if code else 'UNKNOWN'}: {_details(err)}"
