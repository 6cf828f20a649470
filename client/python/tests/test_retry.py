"""Required test 4: the retry helper never retries while the breaker is
open, and does not retry an outcome not worth retrying."""

from __future__ import annotations

import asyncio
import time
import types
from typing import Optional

import pytest
from conftest import Breakerd, HttpError, MakeClient, unique

import breakerd._client as client_module
from breakerd import BreakerOpenError, Client, Outcome, RejectReason
from breakerd._proto import breaker_pb2 as pb


@pytest.mark.parametrize("watch", [False, True], ids=["sidecar", "watch"])
def test_retry_stops_once_the_breaker_opens(
    watch: bool, breakerd: Breakerd, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    dep = unique("retry/opens")
    client = make_client(breakerd, watch=watch)
    sleeps: list[float] = []
    # record the backoff instead of sleeping (only inside breakerd._client)
    fake_time = types.SimpleNamespace(monotonic=time.monotonic, sleep=sleeps.append)
    monkeypatch.setattr(client_module, "time", fake_time)
    calls = 0

    def always_503() -> None:
        nonlocal calls
        calls += 1
        raise HttpError(503)

    with pytest.raises(BreakerOpenError) as refused:
        client.retry(dep, always_503, max_attempts=5, base=0.1, max_backoff=0.15)
    assert calls == 3, "called again while open"
    assert refused.value.reason == RejectReason.OPEN
    assert isinstance(refused.value.__cause__, HttpError)
    assert breakerd.get_state(dep).state == pb.STATE_OPEN
    assert breakerd.reports(dep, "server_error", "counted_failure") == 3
    # full jitter: uniform(0, min(max, base * 2^(n-1))) before attempts 1..3
    assert len(sleeps) == 3
    for n, slept in enumerate(sleeps, start=1):
        assert 0 <= slept <= min(0.15, 0.1 * 2 ** (n - 1))


def test_bad_request_is_not_retried(breakerd: Breakerd, make_client: MakeClient) -> None:
    dep = unique("retry/bad-request")
    client = make_client(breakerd)
    calls = 0

    def always_400() -> None:
        nonlocal calls
        calls += 1
        raise HttpError(400)

    with pytest.raises(HttpError):
        client.retry(dep, always_400, max_attempts=5, base=0.001)
    assert calls == 1
    assert breakerd.reports(dep, "bad_request", "neutral") == 1


def test_retry_succeeds_after_a_transient_failure(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("retry/transient")
    client = make_client(breakerd)
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError
        return "ok"

    assert client.retry(dep, flaky, base=0.001) == "ok"
    assert calls == 2
    assert breakerd.reports(dep, "timeout", "counted_failure") == 1
    assert breakerd.reports(dep, "success", "counted_success") == 1
    assert breakerd.metric("breakerd_retries_total") >= 1


def test_last_attempt_reraises_the_call_error(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("retry/exhausted")
    client = make_client(breakerd)
    calls = 0

    def always_502() -> None:
        nonlocal calls
        calls += 1
        raise HttpError(502)

    with pytest.raises(HttpError):
        client.retry(dep, always_502, max_attempts=2, base=0.001)
    assert calls == 2


def test_refused_first_attempt_never_calls(breakerd: Breakerd, make_client: MakeClient) -> None:
    dep = unique("retry/forced")
    breakerd.force_open(dep)
    client = make_client(breakerd, watch=False)
    called = []
    with pytest.raises(BreakerOpenError) as refused:
        client.retry(dep, lambda: called.append(1))
    assert not called and refused.value.__cause__ is None
    assert refused.value.reason == RejectReason.FORCED_OPEN


class ModelRefusal(Exception):
    """A model refused to answer: the upstream worked, the answer is unusable."""


def _soft_failures(exc: BaseException) -> Optional[Outcome]:
    return Outcome.SOFT_FAILURE if isinstance(exc, ModelRefusal) else None


# conformance: soft-failure
@pytest.mark.parametrize("form", ["retry", "retry_async"])
def test_a_soft_failure_is_not_retried(
    form: str, breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique(f"retry/soft-{form}")
    client = make_client(breakerd, classifier=_soft_failures)
    calls = 0

    def refuse() -> str:
        nonlocal calls
        calls += 1
        raise ModelRefusal("content filter")

    async def refuse_async() -> str:
        return refuse()

    with pytest.raises(ModelRefusal):
        if form == "retry":
            client.retry(dep, refuse, max_attempts=3, base=0.001)
        else:
            asyncio.run(client.retry_async(dep, refuse_async, max_attempts=3, base=0.001))
    assert calls == 1, "a soft failure was retried"
    assert breakerd.reports(dep, "soft_failure", "counted_success") == 1
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 1
    assert breakerd.acquires(dep) == 1
