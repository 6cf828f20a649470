"""Required test 2: a breaker opened through one client is refused locally,
with no RPC, by another client that learned it from the Watch stream."""

from __future__ import annotations


import pytest
from conftest import Breakerd, MakeClient, sidecar_decision, trip, unique, wait_for

from breakerd import BreakerOpenError, Client, OutcomeKind, RejectReason, Source, State
from breakerd._proto import breaker_pb2 as pb


def test_breaker_opened_by_one_client_is_refused_locally_by_another(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("refusal/tripped")
    tripper = make_client(breakerd, watch=False)
    watcher = make_client(breakerd)
    trip(tripper, dep)
    assert breakerd.get_state(dep).state == pb.STATE_OPEN

    wait_for(lambda: watcher.cached_state(dep) == State.OPEN, 10, "the OPEN Watch event")
    acquires_before = breakerd.acquires(dep)
    local_before = watcher.stats().local_rejections

    decision = watcher.acquire(dep)
    assert not decision.allowed
    assert decision.source == Source.LOCAL
    assert decision.reason == RejectReason.OPEN and decision.state == State.OPEN
    assert 0 < decision.retry_after <= 30
    assert decision.permit == 0
    retry = watcher.acquire(dep, attempt=1)  # retries follow the same rule
    assert retry.source == Source.LOCAL and not retry.allowed

    ran = False
    with pytest.raises(BreakerOpenError) as refused:
        with watcher.guard(dep):
            ran = True
    assert not ran and refused.value.source == Source.LOCAL

    assert breakerd.acquires(dep) == acquires_before, "breakerd saw an Acquire"
    assert watcher.stats().local_rejections == local_before + 3


def test_forced_open_is_refused_locally_until_forced_closed(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("refusal/forced")
    client = make_client(breakerd)
    breakerd.force_open(dep)
    wait_for(lambda: client.cached_state(dep) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    decision = client.acquire(dep)
    assert (decision.allowed, decision.source, decision.reason) == (
        False,
        Source.LOCAL,
        RejectReason.FORCED_OPEN,
    )
    assert breakerd.acquires(dep) == 0

    breakerd.force_close(dep)
    wait_for(lambda: client.cached_state(dep) == State.FORCED_CLOSED, 10, "FORCED_CLOSED event")
    decision = client.acquire(dep)
    assert decision.allowed and decision.source == Source.SIDECAR
    assert breakerd.acquires(dep) == 1


def test_open_past_its_cooldown_goes_to_the_sidecar(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("short/cooldown")  # policy short/*: 1 s cooldown
    client = make_client(breakerd)
    trip(client, dep)
    wait_for(lambda: client.cached_state(dep) == State.OPEN, 10, "the OPEN Watch event")
    assert client.acquire(dep).source == Source.LOCAL

    # Once the cooldown has run out locally the client asks breakerd, which
    # hands out the half-open probe.
    probe = wait_for(
        lambda: sidecar_decision(client, dep),
        10,
        "a decision from the sidecar after the cooldown",
    )
    assert probe.allowed and probe.probe and probe.state == State.HALF_OPEN
    client.report(dep, probe.permit, OutcomeKind.SUCCESS)
    assert breakerd.get_state(dep).state == pb.STATE_CLOSED
    wait_for(lambda: client.cached_state(dep) == State.CLOSED, 10, "the CLOSED Watch event")
    assert client.acquire(dep).source == Source.SIDECAR
