"""Required test 1: the guard reports each outcome class, and a refused guard
does not run the call."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Coroutine, Optional

import grpc
import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import BreakerOpenError, Client, Guard, OutcomeKind, RejectReason, Source
from breakerd._proto import breaker_pb2 as pb


def _raise(exc: BaseException) -> Callable[[Guard, Breakerd], None]:
    def body(g: Guard, server: Breakerd) -> None:
        raise exc

    return body


def _raise_rpc_error(g: Guard, server: Breakerd) -> None:
    raise server.unimplemented_error()


# name -> (what the guarded block does, class, effect breakerd records)
CASES: dict[str, tuple[Callable[[Guard, Breakerd], None], str, str]] = {
    "normal-exit": (lambda g, s: None, "success", "counted_success"),
    "set-http-200": (lambda g, s: g.set_http_status(200), "success", "counted_success"),
    "set-http-503": (lambda g, s: g.set_http_status(503), "server_error", "counted_failure"),
    "raise-http-503": (_raise(HttpError(503)), "server_error", "counted_failure"),
    "set-http-404": (lambda g, s: g.set_http_status(404), "bad_request", "neutral"),
    "raise-http-404": (_raise(HttpError(404)), "bad_request", "neutral"),
    "set-http-429": (lambda g, s: g.set_http_status(429, "1"), "rate_limited", "counted_failure"),
    "raise-timeout": (_raise(TimeoutError("slow")), "timeout", "counted_failure"),
    "raise-connection": (_raise(ConnectionRefusedError()), "connection_error", "counted_failure"),
    "raise-other": (_raise(RuntimeError("bug")), "server_error", "counted_failure"),
    "raise-cancelled": (_raise(asyncio.CancelledError()), "cancelled", "neutral"),
    "set-grpc-unavailable": (
        lambda g, s: g.set_grpc_code(grpc.StatusCode.UNAVAILABLE),
        "connection_error",
        "counted_failure",
    ),
    "set-grpc-deadline": (
        lambda g, s: g.set_grpc_code(grpc.StatusCode.DEADLINE_EXCEEDED),
        "timeout",
        "counted_failure",
    ),
    "set-grpc-permission": (lambda g, s: g.set_grpc_code(7), "auth_error", "neutral"),
    # a real RpcError: breakerd answers UNIMPLEMENTED for an unknown method
    "raise-grpc-unimplemented": (_raise_rpc_error, "bad_request",
        "neutral",
    ),
    "set-soft-failure": (
        lambda g, s: g.set_outcome(OutcomeKind.SOFT_FAILURE),
        "soft_failure",
        "counted_success",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_guard_reports_the_outcome_class(
    case: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    body, cls, effect = CASES[case]
    dep = unique(f"guard/{case}")
    client = make_client(breakerd)
    raised: Optional[BaseException] = None
    try:
        with client.guard(dep) as g:
            assert g.decision is not None and g.decision.source == Source.SIDECAR
            assert g.permit != 0
            body(g, breakerd)
    except BaseException as exc:  # noqa: BLE001 - the guard must re-raise as is
        raised = exc
    if case.startswith("raise-"):
        assert raised is not None, "the guard swallowed the call's error"
    else:
        assert raised is None
    assert g.outcome is not None
    wait_for(lambda: breakerd.reports(dep, cls, effect) == 1, 5, f"{cls}/{effect} report")
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 1, "reported once"
    status = breakerd.get_state(dep)
    assert status.consecutive_failures == (1 if effect == "counted_failure" else 0)
    assert client.stats().report_errors == 0


def test_guard_reports_latency(breakerd: Breakerd, make_client: MakeClient) -> None:
    dep = unique("guard/latency")
    client = make_client(breakerd)
    with client.guard(dep):
        time.sleep(0.05)
    total = wait_for(
        lambda: breakerd.metric("breakerd_call_duration_seconds_sum", dependency=dep), 5
    )
    assert 0.05 <= total < 5


@pytest.mark.parametrize("watch", [False, True], ids=["sidecar", "local"])
def test_refused_guard_does_not_run_the_call(
    watch: bool, breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("guard/refused")
    breakerd.force_open(dep)
    client = make_client(breakerd, watch=watch)
    if watch:
        wait_for(lambda: client.cached_state(dep) is not None, 10, "the Watch event")
    ran = False
    with pytest.raises(BreakerOpenError) as refused:
        with client.guard(dep):
            ran = True
    assert not ran
    assert refused.value.reason == RejectReason.FORCED_OPEN
    assert refused.value.source == (Source.LOCAL if watch else Source.SIDECAR)
    assert refused.value.dependency == dep
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 0


def test_guarded_decorator_sync_and_async(breakerd: Breakerd, make_client: MakeClient) -> None:
    client = make_client(breakerd)
    ok, failing, closed = unique("deco/ok"), unique("deco/fail"), unique("deco/closed")
    calls: list[str] = []

    @client.guarded(ok)
    def double(x: int) -> int:
        calls.append("double")
        return 2 * x

    @client.guarded(failing)
    async def fetch() -> str:
        calls.append("fetch")
        raise TimeoutError

    @client.guarded(closed)
    async def never() -> str:
        calls.append("never")
        return "ran"

    assert double(21) == 42
    with pytest.raises(TimeoutError):
        asyncio.run(fetch())
    breakerd.force_open(closed)
    with pytest.raises(BreakerOpenError):
        asyncio.run(never())
    assert calls == ["double", "fetch"]
    assert breakerd.reports(ok, "success", "counted_success") == 1
    assert breakerd.reports(failing, "timeout", "counted_failure") == 1
    assert breakerd.metric("breakerd_reports_total", dependency=closed) == 0


# conformance: cancel-call
def test_tasks_cancelled_during_the_call_report_cancelled_once(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    client = make_client(breakerd)
    dep = unique("async/cancelled")  # consecutive_failures 3 (the test config)
    calls = 5

    async def main() -> None:
        for _ in range(calls):
            inside = asyncio.Event()

            async def guarded_sleep() -> None:
                async with client.guard_async(dep):
                    inside.set()
                    await asyncio.sleep(30)  # the upstream call, given up on

            task = asyncio.ensure_future(guarded_sleep())
            await asyncio.wait_for(inside.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    wait_for(
        lambda: breakerd.reports(dep, "cancelled", "neutral") == calls, 5, "the cancelled reports"
    )
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == calls, "another class"
    allowed = breakerd.metric("breakerd_acquire_total", dependency=dep, decision="allowed")
    assert allowed == calls
    assert breakerd.get_state(dep).state == pb.STATE_CLOSED
    assert client.stats().report_errors == 0


# conformance: classifier-raises
@pytest.mark.parametrize(
    "helper", ["guard", "guard_async", "guarded", "retry", "retry_async", "first", "first_async"]
)
def test_a_classifier_that_raises_leaves_no_permit_unreported(
    helper: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, spare = unique(f"classifier/{helper}"), unique(f"classifier/{helper}-spare")

    class ClassifierBug(Exception):
        pass

    def classify(exc: BaseException) -> None:
        raise ClassifierBug(f"cannot classify {exc!r}")

    client = make_client(breakerd, classifier=classify)
    calls: list[str] = []

    def call(d: str = dep) -> None:
        calls.append(d)
        raise ValueError("a plain error")  # the default classifier: server_error

    async def call_async(d: str = dep) -> None:
        call(d)

    runs: dict[str, Callable[[], object]] = {
        "guard": lambda: _in_guard(client, dep, call),
        "guard_async": lambda: asyncio.run(_in_guard_async(client, dep, call_async)),
        "guarded": lambda: client.guarded(dep)(call)(),
        "retry": lambda: client.retry(dep, call, base=0.001),
        "retry_async": lambda: asyncio.run(client.retry_async(dep, call_async, base=0.001)),
        "first": lambda: client.first([dep, spare], call),
        "first_async": lambda: asyncio.run(client.first_async([dep, spare], call_async)),
    }
    with pytest.raises(ClassifierBug) as raised:
        runs[helper]()
    assert isinstance(raised.value.__context__, ValueError), "the call's error is lost"
    assert calls == [dep], "retried or moved on after the classifier failed"
    wait_for(
        lambda: breakerd.reports(dep, "server_error", "counted_failure") == 1, 5, "the report"
    )
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 1, "reported once"
    assert breakerd.acquires(dep) == 1
    assert breakerd.acquires(spare) == 0


def _in_guard(client: Client, dep: str, call: Callable[[], None]) -> None:
    with client.guard(dep):
        call()


async def _in_guard_async(
    client: Client, dep: str, call: Callable[[], Coroutine[None, None, None]]
) -> None:
    async with client.guard_async(dep):
        await call()


def test_bad_dependency_name_is_a_programming_error(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    from breakerd import InvalidArgumentError

    client = make_client(breakerd)
    for bad in ["", "has space", "x" * 201]:
        with pytest.raises(InvalidArgumentError):
            client.acquire(bad)
    with pytest.raises(InvalidArgumentError):
        client.acquire_first([])
    assert client.stats().fail_open == 0


def test_report_is_sent_once_and_errors_are_counted(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    client = make_client(breakerd)
    dep = unique("report/once")
    decision = client.acquire(dep)
    assert decision.allowed and decision.permit
    client.report(dep, decision.permit, OutcomeKind.SUCCESS, latency=0.001)
    assert client.stats().report_errors == 0
    # a permit breakerd never issued: refused, counted, never raised
    client.report(dep, decision.permit + 1_000_000, OutcomeKind.SUCCESS)
    assert client.stats().report_errors == 1
    client.report(dep, 0, OutcomeKind.SUCCESS)  # permit 0 is not sent
    assert client.stats().report_errors == 1
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 1
    assert breakerd.get_state(dep).state == pb.STATE_CLOSED
