"""Issue 14, defect 8: retry/first given an async function must not report a
coroutine that never ran as a success. The sync helpers refuse async calls
(TypeError naming the async variant); retry_async/first_async run them;
@guarded refuses generator functions."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Coroutine, Iterator

import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import BreakerOpenError, Client, RejectReason, Source


def test_retry_refuses_a_coroutine_function_before_acquiring(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/retry-coro")
    client = make_client(breakerd)

    async def call() -> str:
        raise AssertionError("never run")

    with pytest.raises(TypeError, match=r"retry_async"):
        client.retry(dep, call)  # type: ignore[unused-coroutine]
    with pytest.raises(TypeError, match=r"first_async"):
        client.first([dep], lambda d: call())  # type: ignore[unused-coroutine]
    with pytest.raises(TypeError, match=r"first_async"):
        client.first([dep], _takes_dep(call))
    assert breakerd.reports(dep, "cancelled", "neutral") == 1  # only the lambda's permit


def test_sync_helpers_refuse_an_awaitable_result_and_report_it_cancelled(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, spare = unique("async-helpers/retry-lambda"), unique("async-helpers/spare")
    client = make_client(breakerd)
    ran: list[str] = []

    async def call(d: str) -> str:
        ran.append(d)
        return d

    with pytest.raises(TypeError, match=r"retry_async") as refused:
        client.retry(  # type: ignore[unused-coroutine]
            dep, lambda: call(dep), max_attempts=3, base=0.001
        )
    assert "not run" in str(refused.value)
    with pytest.raises(TypeError, match=r"first_async"):
        client.first([dep, spare], lambda d: call(d))  # type: ignore[unused-coroutine]
    assert ran == []
    # Each permit reported once, neutral: no SUCCESS for a call never made,
    # no retry, and the fallback chain did not go on to the spare.
    assert breakerd.reports(dep, "cancelled", "neutral") == 2
    assert breakerd.reports(dep, "success", "counted_success") == 0
    assert breakerd.acquires(dep) == 2
    assert breakerd.acquires(spare) == 0


def test_retry_async_retries_and_stops_once_the_breaker_opens(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/retry-opens")
    client = make_client(breakerd, watch=False)
    calls = 0

    async def always_503() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        raise HttpError(503)

    with pytest.raises(BreakerOpenError) as refused:
        asyncio.run(client.retry_async(dep, always_503, max_attempts=5, base=0.001))
    assert calls == 3, "called again while open"
    assert refused.value.reason == RejectReason.OPEN
    assert isinstance(refused.value.__cause__, HttpError)
    assert breakerd.reports(dep, "server_error", "counted_failure") == 3


def test_retry_async_succeeds_after_a_transient_failure(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/retry-transient")
    client = make_client(breakerd)
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError
        return "ok"

    assert asyncio.run(client.retry_async(dep, flaky, base=0.001)) == "ok"
    assert calls == 2
    assert breakerd.reports(dep, "timeout", "counted_failure") == 1
    assert breakerd.reports(dep, "success", "counted_success") == 1


def test_retry_async_does_not_retry_a_bad_request(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/retry-400")
    client = make_client(breakerd)
    calls = 0

    async def always_400() -> None:
        nonlocal calls
        calls += 1
        raise HttpError(400)

    with pytest.raises(HttpError):
        asyncio.run(client.retry_async(dep, always_400, max_attempts=5, base=0.001))
    assert calls == 1
    assert breakerd.reports(dep, "bad_request", "neutral") == 1


def test_retry_async_refuses_a_sync_function(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/retry-sync")
    client = make_client(breakerd)
    with pytest.raises(TypeError, match=r"client\.retry\("):
        asyncio.run(client.retry_async(dep, lambda: 42))  # type: ignore[arg-type, return-value]
    assert breakerd.reports(dep, "cancelled", "neutral") == 1
    assert breakerd.acquires(dep) == 1


@pytest.mark.parametrize("watch", [False, True], ids=["sidecar", "local"])
def test_first_async_skips_an_open_dependency_and_moves_on_after_a_failure(
    watch: bool, breakerd: Breakerd, make_client: MakeClient
) -> None:
    closed, failing, works = (
        unique("async-helpers/first-open"),
        unique("async-helpers/first-fails"),
        unique("async-helpers/first-works"),
    )
    breakerd.force_open(closed)
    client = make_client(breakerd, watch=watch)
    if watch:
        wait_for(lambda: client.cached_state(closed) is not None, 10, "the Watch event")
    called: list[str] = []

    async def call(dep: str) -> str:
        called.append(dep)
        await asyncio.sleep(0)
        if dep == failing:
            raise HttpError(503)
        return "answer from " + dep

    result = asyncio.run(client.first_async([closed, failing, works], call))
    assert result == "answer from " + works
    assert called == [failing, works]
    assert breakerd.reports(failing, "server_error", "counted_failure") == 1
    assert breakerd.reports(works, "success", "counted_success") == 1
    assert breakerd.metric("breakerd_reports_total", dependency=closed) == 0


def test_first_async_refuses_when_none_is_granted(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("async-helpers/first-closed-a"), unique("async-helpers/first-closed-b")
    breakerd.force_open(a)
    breakerd.force_open(b)
    client = make_client(breakerd, watch=False)

    async def call(dep: str) -> str:
        raise AssertionError("never run")

    with pytest.raises(BreakerOpenError) as refused:
        asyncio.run(client.first_async([a, b], call))
    assert refused.value.source == Source.SIDECAR


def test_guarded_refuses_generator_functions(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/generators")
    client = make_client(breakerd)

    async def pages() -> AsyncIterator[int]:
        yield 1

    def lines() -> Iterator[int]:
        yield 1

    with pytest.raises(TypeError, match=r"async generator.*guard_async"):
        client.guarded(dep)(pages)
    with pytest.raises(TypeError, match=r"generator.*with client\.guard\("):
        client.guarded(dep)(lines)
    assert breakerd.acquires(dep) == 0


def test_guarded_refuses_a_plain_function_returning_a_coroutine(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-helpers/guarded-returns-coro")
    client = make_client(breakerd)
    ran: list[int] = []

    async def work() -> int:
        ran.append(1)
        return 1

    @client.guarded(dep)
    def indirect() -> Coroutine[None, None, int]:
        return work()

    with pytest.raises(TypeError, match=r"async def"):
        indirect()  # type: ignore[unused-coroutine]
    assert ran == []
    assert breakerd.reports(dep, "cancelled", "neutral") == 1


def _takes_dep(fn: Callable[[], Coroutine[None, None, str]]) -> Callable[[str], object]:
    """An async function of the dependency, as first() would call it."""

    async def call(dep: str) -> str:
        return await fn()

    return call
