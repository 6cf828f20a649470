"""Required test 5: the fallback chain skips an open dependency and moves on
when the granted call fails."""

from __future__ import annotations

import asyncio


import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import BreakerOpenError, Client, Source, State


@pytest.mark.parametrize("watch", [False, True], ids=["sidecar", "local"])
def test_first_skips_an_open_dependency(
    watch: bool, breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("first/a"), unique("first/b")
    breakerd.force_open(a)
    client = make_client(breakerd, watch=watch)
    if watch:
        wait_for(lambda: client.cached_state(a) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        return "answer from " + dep

    assert client.first([a, b], call) == "answer from " + b
    assert called == [b]
    assert breakerd.reports(b, "success", "counted_success") == 1
    if watch:  # dropped locally: breakerd was never asked about a
        assert breakerd.acquires(a) == 0
        assert client.stats().local_rejections == 1
    else:
        assert breakerd.metric(
            "breakerd_acquire_total", dependency=a, decision="rejected_forced_open"
        ) == 1


def test_first_moves_on_when_the_granted_call_fails(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b, c = unique("first/fails"), unique("first/works"), unique("first/unused")
    client = make_client(breakerd)
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        if dep == a:
            raise HttpError(503)
        return dep

    assert client.first([a, b, c], call) == b
    assert called == [a, b]
    assert breakerd.reports(a, "server_error", "counted_failure") == 1
    assert breakerd.reports(b, "success", "counted_success") == 1
    assert breakerd.acquires(c) == 0


def test_first_refuses_when_none_is_granted(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("first/closed-a"), unique("first/closed-b")
    breakerd.force_open(a)
    breakerd.force_open(b)
    client = make_client(breakerd, watch=False)
    called: list[str] = []
    with pytest.raises(BreakerOpenError) as refused:
        client.first([a, b], called.append)
    assert not called
    assert refused.value.source == Source.SIDECAR


def test_first_raises_the_last_error_when_every_call_fails(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique("first/down-a"), unique("first/down-b")
    client = make_client(breakerd)
    called: list[str] = []

    def call(dep: str) -> None:
        called.append(dep)
        raise HttpError(500 if dep == a else 502)

    with pytest.raises(HttpError) as failed:
        client.first([a, b], call)
    assert failed.value.status_code == 502
    assert called == [a, b]


# conformance: first-non-retryable
@pytest.mark.parametrize("form", ["first", "first_async"])
@pytest.mark.parametrize(("status", "moves_on"), [(400, False), (503, True)])
def test_first_moves_on_only_after_an_outcome_worth_retrying(
    form: str, status: int, moves_on: bool, breakerd: Breakerd, make_client: MakeClient
) -> None:
    a, b = unique(f"first/{status}-a"), unique(f"first/{status}-b")
    client = make_client(breakerd)
    called: list[str] = []

    def call(dep: str) -> str:
        called.append(dep)
        if dep == a:
            raise HttpError(status)
        return "answer from " + dep

    async def call_async(dep: str) -> str:
        return call(dep)

    def run() -> str:
        if form == "first":
            return client.first([a, b], call)
        return asyncio.run(client.first_async([a, b], call_async))

    if moves_on:  # a server error: b is called and its result returned
        assert run() == "answer from " + b
        assert called == [a, b]
        assert breakerd.reports(a, "server_error", "counted_failure") == 1
        assert breakerd.reports(b, "success", "counted_success") == 1
    else:  # a bad request: the chain stops with a's error, b is not called
        with pytest.raises(HttpError) as failed:
            run()
        assert failed.value.status_code == status
        assert called == [a]
        assert breakerd.reports(a, "bad_request", "neutral") == 1
        assert breakerd.acquires(b) == 0
