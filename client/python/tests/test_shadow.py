"""Shadow mode: the Watch cache stores each breaker's mode and never refuses
a shadow breaker locally (reported as "three timeouts on payments/psp, then
every acquire returns allowed=False, source=LOCAL")."""

from __future__ import annotations


from conftest import CONFIG, Breakerd, MakeClient, sidecar_decision, trip, unique, wait_for

from breakerd import Client, RejectReason, Source, State
from breakerd._proto import breaker_pb2 as pb


# conformance: shadow
def test_shadow_breaker_open_is_never_refused_locally(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("payments/psp")  # policy payments/*: mode shadow, consecutive_failures 3
    tripper = make_client(breakerd, watch=False)
    watcher = make_client(breakerd)
    trip(tripper, dep, 504)
    assert breakerd.get_state(dep).state == pb.STATE_OPEN

    wait_for(lambda: watcher.cached_state(dep) == State.OPEN, 10, "the OPEN Watch event")
    local_before = watcher.stats().local_rejections
    acquires_before = breakerd.acquires(dep)
    calls = 20
    ran = 0
    for _ in range(calls):
        with watcher.guard(dep) as g:
            ran += 1
            g.set_http_status(200)
        assert g.decision is not None and g.decision.allowed, g.decision
        assert g.decision.source == Source.SIDECAR, g.decision
    assert ran == calls
    for attempt in (0, 1):  # retries and AcquireFirst follow the same rule
        assert watcher.acquire(dep, attempt).source == Source.SIDECAR
    assert watcher.acquire_first([dep]).source == Source.SIDECAR
    assert watcher.stats().local_rejections == local_before
    assert breakerd.acquires(dep) == acquires_before + calls + 3, "breakerd was not asked"


def test_enforce_breaker_tripped_the_same_way_is_refused_locally(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("enforce/psp")  # defaults: mode enforce, consecutive_failures 3
    tripper = make_client(breakerd, watch=False)
    watcher = make_client(breakerd)
    trip(tripper, dep, 504)
    wait_for(lambda: watcher.cached_state(dep) == State.OPEN, 10, "the OPEN Watch event")
    local_before = watcher.stats().local_rejections
    decision = watcher.acquire(dep)
    assert not decision.allowed
    assert (decision.source, decision.reason) == (Source.LOCAL, RejectReason.OPEN)
    assert watcher.stats().local_rejections == local_before + 1


def test_reload_to_shadow_stops_local_refusal_of_an_open_breaker(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    # The reload event keeps the breaker's generation and state: the cache
    # must apply an equal generation, or the client would go on refusing.
    dep = unique("flip/psp")
    tripper = make_client(own_breakerd, watch=False)
    watcher = make_client(own_breakerd)
    trip(tripper, dep, 504)
    wait_for(lambda: watcher.cached_state(dep) == State.OPEN, 10, "the OPEN Watch event")
    assert watcher.acquire(dep).source == Source.LOCAL

    own_breakerd.reload(CONFIG + '  - match: "flip/*"\n    mode: shadow\n')
    decision = wait_for(
        lambda: sidecar_decision(watcher, dep),
        10,
        "the reload event to make the breaker shadow",
    )
    assert decision.allowed
    assert watcher.cached_state(dep) == State.OPEN  # still open, only the mode changed
    local_before = watcher.stats().local_rejections
    assert watcher.acquire(dep).source == Source.SIDECAR
    assert watcher.stats().local_rejections == local_before
