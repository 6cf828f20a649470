"""The breakerd client: acquire, report, guard, retry, fallback chain."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import random
import re
import threading
import time
from types import TracebackType
from typing import (
    Any,
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

from ._cache import StateCache
from ._outcome import Outcome, OutcomeKind
from ._presence import SidecarPresence
from ._proto import breaker_pb2 as pb
from ._types import (
    BreakerOpenError,
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
Classifier = Callable[[BaseException], Optional[Outcome]]
ChannelOptions = Sequence[Tuple[str, Any]]
_PB_OUTCOME = {kind: "OUTCOME_" + kind.name for kind in OutcomeKind}  # enum names
# Errors that make the sidecar away: it is hung, throttled or not there.
_AWAY_CODES = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def _method(service: str, method: str) -> str:
    return "/%s/%s" % (pb.DESCRIPTOR.services_by_name[service].full_name, method)


def _seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def _check_name(dependency: str) -> None:
    valid = isinstance(dependency, str) and _NAME.fullmatch(dependency) is not None
    if not valid:
        raise InvalidArgumentError(
            f"dependency: {dependency!r} must be 1-200 characters of [A-Za-z0-9._:/@-]"
        )


class _Health:
    """Logs once when something starts failing and once when it recovers."""

    def __init__(self, failing: str, recovered: str) -> None:
        self._lock = threading.Lock()
        self._failing = False
        self._failing_msg = failing
        self._recovered_msg = recovered

    def failed(self, detail: str) -> None:
        with self._lock:
            if self._failing:
                return
            self._failing = True
        _log.warning("%s (%s)", self._failing_msg, detail)

    def ok(self) -> None:
        if not self._failing:  # unlocked fast path; the swap below decides
            return
        with self._lock:
            was_failing, self._failing = self._failing, False
        if was_failing:
            _log.info(self._recovered_msg)


class Client:
    """A connection to breakerd: one gRPC channel and one Watch stream.

    Create one per process and share it: every method is thread-safe, and the
    guards may be used from any number of threads and asyncio tasks.

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
        away_probe_interval: seconds between health checks while breakerd
            is away (default 0.1). An Acquire or AcquireFirst that times out
            or finds breakerd unavailable makes it away: decisions then fail
            open (or closed) at once, with no RPC and no Report, until a
            ``grpc.health.v1.Health/Check`` succeeds or the Watch stream
            delivers a message. Nothing runs while breakerd is present.
        classifier: maps an exception raised by a guarded call to an Outcome;
            return None to fall back to :meth:`Outcome.from_exception`.
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
    ) -> None:
        if fail_mode not in ("open", "closed"):
            raise ValueError(f"fail_mode must be 'open' or 'closed', got {fail_mode!r}")
        if not decision_timeout > 0:
            raise ValueError("decision_timeout must be positive")
        if not away_probe_interval > 0:
            raise ValueError("away_probe_interval must be positive")
        self.target: str = target or os.environ.get("BREAKERD_ADDR") or DEFAULT_TARGET
        self.decision_timeout = float(decision_timeout)
        self.fail_mode: FailMode = fail_mode
        self._classifier = classifier
        self._backoff_first, self._backoff_max = watch_backoff

        options: list[tuple[str, Any]] = [
            ("grpc.enable_http_proxy", 0),  # a sidecar is local: never via a proxy
            # Reconnect to a restarted sidecar quickly, not after grpc's 1 s+ backoff.
            # (Not min_reconnect_backoff_ms: that is also the connect timeout.)
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ]
        options.extend(channel_options)
        self._channel = grpc.insecure_channel(self.target, options=options)
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

        self._lock = threading.Lock()
        self._counts = {name: 0 for name in Stats.__dataclass_fields__}
        self._sidecar = SidecarPresence(
            self._health_check, away_probe_interval, target=self.target, fail_mode=fail_mode
        )
        self._reports = _Health(
            "breakerd rejects or misses reports: counting them in report_errors",
            "breakerd accepts reports again",
        )
        self._cache = StateCache()
        self._closed = threading.Event()
        self._watch_call: Optional[grpc.Call] = None
        self._watch_thread: Optional[threading.Thread] = None
        if watch:
            self._watch_thread = threading.Thread(
                target=self._watch_loop, name="breakerd-watch", daemon=True
            )
            self._watch_thread.start()

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """End the Watch stream and close the channel. Idempotent."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            call = self._watch_call
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
        (a fresh connection can take longer than ``decision_timeout``)."""
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

        Refuses locally (source LOCAL, no RPC) while the Watch cache says an
        enforcing breaker is open; else asks breakerd within
        ``decision_timeout``, or, while breakerd is away, decides at once
        without it. Never raises for an unreachable breakerd (FAIL_OPEN /
        FAIL_CLOSED).

        Raises:
            InvalidArgumentError: a bad dependency name.
        """
        _check_name(dependency)
        if attempt < 0:
            raise InvalidArgumentError("attempt must be >= 0")
        self._check_open()
        refusal = self._cache.refusal(dependency)
        if refusal is not None:
            self._count("local_rejections")
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
        request = pb.AcquireRequest(dependency=dependency, attempt=attempt)
        try:
            resp = self._acquire_rpc(request, timeout=self.decision_timeout, wait_for_ready=False)
        except grpc.RpcError as err:
            return self._degraded(err, dependency)
        self._sidecar.answered()
        return self._decision(resp, dependency)

    def acquire_first(self, dependencies: Sequence[str], attempt: int = 0) -> Decision:
        """Acquire the first allowed of ``dependencies`` (in order of
        preference) in one round trip; ``Decision.dependency`` is the one
        granted. Dependencies the Watch cache refuses are dropped before the
        RPC; if none is left the refusal is local. When breakerd cannot
        answer, fail open grants the first remaining dependency.

        Raises:
            InvalidArgumentError: an empty list or a bad name.
        """
        deps = list(dependencies)
        if not deps:
            raise InvalidArgumentError("dependencies: at least one is required")
        for dep in deps:
            _check_name(dep)
        self._check_open()
        remaining: list[str] = []
        refusals = []
        for dep in deps:
            refusal = self._cache.refusal(dep)
            if refusal is None:
                remaining.append(dep)
            else:
                refusals.append(refusal)
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
        if self._sidecar.away:
            return self._failed_decision(remaining[0], away=True)
        request = pb.AcquireFirstRequest(dependencies=remaining, attempt=attempt)
        try:
            resp = self._acquire_first_rpc(
                request, timeout=self.decision_timeout, wait_for_ready=False
            )
        except grpc.RpcError as err:
            return self._degraded(err, remaining[0])
        self._sidecar.answered()
        return self._decision(resp, resp.dependency or remaining[-1])

    def report(
        self,
        dependency: str,
        permit: int,
        outcome: Union[Outcome, OutcomeKind],
        latency: Optional[float] = None,
    ) -> None:
        """Tell breakerd how the call allowed with ``permit`` went.

        ``latency`` is the call's duration in seconds. A permit of 0 (a
        fail-open decision) is not sent, nor is any while breakerd is away
        (counted in ``report_errors``). Never raises for a failed Report: it
        is counted in ``report_errors`` and logged once per change.
        """
        if not permit:
            return
        if self._sidecar.away:
            self._count("report_errors")
            return
        if not isinstance(outcome, Outcome):
            outcome = Outcome.of(outcome)
        request = pb.ReportRequest(
            dependency=dependency,
            permit=permit,
            outcome=_PB_OUTCOME[outcome.kind],
            http_status=outcome.http_status,
        )
        if outcome.grpc_code is not None:
            request.grpc_code = outcome.grpc_code
        if latency is not None:
            request.latency.FromNanoseconds(max(0, int(latency * 1e9)))
        if outcome.retry_after is not None:
            request.retry_after.FromNanoseconds(int(outcome.retry_after * 1e9))
        try:
            self._report_rpc(request, timeout=self.decision_timeout, wait_for_ready=False)
        except grpc.RpcError as err:
            self._count("report_errors")
            self._reports.failed(_describe(err))
        except ValueError:  # the channel was closed under us
            self._count("report_errors")
        else:
            self._reports.ok()

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
        return Guard(self, dependency, attempt)

    def guard_async(self, dependency: str, attempt: int = 0) -> AsyncGuard:
        """:meth:`guard` for ``async with``; the RPCs run in a worker thread so
        the event loop never blocks on breakerd."""
        return AsyncGuard(self, dependency, attempt)

    def guarded(self, dependency: str) -> Callable[[_F], _F]:
        """Decorator: every call of the function runs inside :meth:`guard`
        (:meth:`guard_async` for a coroutine function)."""

        def decorate(fn: _F) -> _F:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    async with self.guard_async(dependency):
                        return await fn(*args, **kwargs)

                return cast(_F, run_async)

            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                with self.guard(dependency):
                    return fn(*args, **kwargs)

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
        request, auth error, cancelled) or the last attempt re-raises the
        call's error.
        """
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        last_error: Optional[BaseException] = None
        for attempt in range(max_attempts):
            if attempt:
                time.sleep(random.uniform(0, min(max_backoff, base * 2 ** (attempt - 1))))
            decision = self.acquire(dependency, attempt)
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = Guard(self, dependency, attempt)
            guard._admit(decision)
            try:
                return guard._call(fn)
            except Exception as exc:
                assert guard.outcome is not None
                if attempt + 1 == max_attempts or not guard.outcome.retryable:
                    raise
                last_error = exc
        raise AssertionError("unreachable")

    def first(self, dependencies: Sequence[str], fn: Callable[[str], _T]) -> _T:
        """A fallback chain: call ``fn(dependency)`` for the first dependency
        breakerd grants (AcquireFirst), guarded. If that call fails, go on
        with the dependencies after it. Raises :class:`BreakerOpenError` when
        none is granted, or the last call's error when every granted one failed.
        """
        remaining = list(dependencies)
        last_error: Optional[Exception] = None
        while remaining:
            decision = self.acquire_first(remaining)
            if not decision.allowed:
                raise BreakerOpenError(decision) from last_error
            guard = Guard(self, decision.dependency, 0)
            guard._admit(decision)
            try:
                return guard._call(fn, decision.dependency)
            except Exception as exc:
                last_error = exc
                granted = (
                    remaining.index(decision.dependency)
                    if decision.dependency in remaining
                    else 0
                )
                remaining = remaining[granted + 1 :]
        assert last_error is not None
        raise last_error

    # -- internals ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise RuntimeError("breakerd client is closed")

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

    def _degraded(self, err: grpc.RpcError, dependency: str) -> Decision:
        """The decision when breakerd could not answer."""
        code = _code(err)
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise InvalidArgumentError(_details(err)) from err
        if self._closed.is_set():
            raise RuntimeError("breakerd client is closed") from err
        self._sidecar.failed(_describe(err), away=code in _AWAY_CODES)
        return self._failed_decision(dependency, away=False)

    def _failed_decision(self, dependency: str, away: bool) -> Decision:
        """FAIL_OPEN or FAIL_CLOSED, counted; ``away``: decided with no RPC."""
        allowed = self.fail_mode == "open"
        with self._lock:
            self._counts["fail_open" if allowed else "fail_closed"] += 1
            if away:
                self._counts["away_decisions"] += 1
        return Decision(
            allowed=allowed,
            source=Source.FAIL_OPEN if allowed else Source.FAIL_CLOSED,
            dependency=dependency,
        )

    def _health_check(self) -> bool:
        """The away probe: True if breakerd's health service says SERVING."""
        try:
            resp = self._health_rpc(
                health_pb2.HealthCheckRequest(service=""),
                timeout=self.decision_timeout,
                wait_for_ready=False,
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
            if self._closed.wait(random.uniform(0, cap)):
                return


class _GuardBase:
    """What :class:`Guard` and :class:`AsyncGuard` share. One guard covers
    one call and reports its permit exactly once; not meant to be shared
    between threads."""

    def __init__(self, client: Client, dependency: str, attempt: int) -> None:
        self._client = client
        self.dependency = dependency
        self.attempt = attempt
        self.decision: Optional[Decision] = None
        """The acquire's answer, once entered."""
        self.outcome: Optional[Outcome] = None
        """The outcome reported, once left."""
        self._explicit: Optional[Outcome] = None
        self._started = 0.0

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
        self._started = time.monotonic()

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn(*args)`` as the admitted call, report it, re-raise its error."""
        try:
            result = fn(*args)
        except BaseException as exc:
            self._finish(exc)
            raise
        self._finish(None)
        return result

    def _check_fresh(self) -> None:
        if self.decision is not None:
            raise RuntimeError("a breakerd guard covers one call; make a new one")

    def _finish(self, exc: Optional[BaseException]) -> None:
        """Report once: the explicit outcome, else ``exc`` classified, else success."""
        if self.outcome is not None or self.decision is None:
            return
        if self._explicit is not None:
            outcome = self._explicit
        elif exc is None:
            outcome = Outcome.SUCCESS
        else:
            outcome = self._client._classify(exc)
        self.outcome = outcome
        self._client.report(
            self.dependency, self.decision.permit, outcome, time.monotonic() - self._started
        )


class Guard(_GuardBase):
    """A context manager guarding one call; see :meth:`Client.guard`."""

    def __enter__(self) -> Guard:
        self._check_fresh()
        self._admit(self._client.acquire(self.dependency, self.attempt))
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._finish(exc)


class AsyncGuard(_GuardBase):
    """An async context manager guarding one call; see :meth:`Client.guard_async`."""

    async def __aenter__(self) -> AsyncGuard:
        self._check_fresh()
        decision = await asyncio.get_running_loop().run_in_executor(
            None, self._client.acquire, self.dependency, self.attempt
        )
        self._admit(decision)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._finish, exc)


def _code(err: grpc.RpcError) -> Optional[grpc.StatusCode]:
    code = getattr(err, "code", None)
    return code() if callable(code) else None


def _details(err: grpc.RpcError) -> str:
    details = getattr(err, "details", None)
    return str(details()) if callable(details) else str(err)


def _describe(err: grpc.RpcError) -> str:
    code = _code(err)
    return f"{code.name if code else 'UNKNOWN'}: {_details(err)}"
