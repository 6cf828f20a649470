"""Required test 6: the Watch cache learns transitions without any Acquire
from this client, and the stream reconnects after breakerd restarts."""

from __future__ import annotations


from conftest import Breakerd, MakeClient, unique, wait_for

from breakerd import Client, Source, State


def test_cache_learns_transitions_without_acquire(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("watch/admin")
    client = make_client(breakerd)
    breakerd.force_open(dep)
    wait_for(lambda: client.cached_state(dep) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    breakerd.force_close(dep)
    wait_for(lambda: client.cached_state(dep) == State.FORCED_CLOSED, 10, "FORCED_CLOSED event")
    assert breakerd.acquires(dep) == 0
    assert client.stats().local_rejections == 0


def test_watch_reconnects_after_breakerd_restarts(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    before, after = unique("watch/before"), unique("watch/after")
    client = make_client(own_breakerd)
    own_breakerd.force_open(before)
    wait_for(lambda: client.cached_state(before) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    assert client.stats().watch_reconnects == 0

    address = own_breakerd.grpc_addr
    own_breakerd.stop()
    wait_for(lambda: client.cached_state(before) is None, 10, "the cache to be cleared")
    assert client.acquire(before).source == Source.FAIL_OPEN
    own_breakerd.start(listen=address)  # same port, fresh state

    wait_for(lambda: own_breakerd.metric("breakerd_watch_streams") >= 1, 20, "a new stream")
    assert client.stats().watch_reconnects >= 1
    own_breakerd.force_open(after)
    wait_for(lambda: client.cached_state(after) == State.FORCED_OPEN, 10, "event after restart")
    assert client.acquire(after).source == Source.LOCAL
    # Nothing of the old breakerd's FORCED_OPEN is left. (The new breakerd
    # may hold `before` CLOSED: the client's batch told it of the fail-open
    # decision above, which creates the breaker that counts it.)
    assert client.cached_state(before) in (None, State.CLOSED)
    wait_for(lambda: client.acquire(before).source == Source.SIDECAR, 10, "sidecar answers")
