"""Reports made while breakerd is away are held, not dropped, and sent once
it is back (client/README.md, "Sidecar away"; issue 14, follow-up 2): a
probe permit never reported would refuse its dependency PROBE_IN_FLIGHT
for the whole lease though the upstream recovered."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Optional

from conftest import Breakerd, MakeClient, free_port, trip, unique, wait_for

from breakerd import BreakerOpenError, Client, Decision, OutcomeKind, Source
from breakerd._held import LIMIT, HeldReports
from breakerd._client import _GuardBase
from breakerd._proto import breaker_pb2 as pb

# Long enough to be a clear timeout on a shared two-core machine (the one
# Acquire that finds breakerd stopped), short enough to cost little.
TIMEOUT = 0.3


def _decided(guard: _GuardBase) -> Decision:
    assert guard.decision is not None
    return guard.decision


def _closed(server: Breakerd, dep: str) -> bool:
    return server.get_state(dep).state == pb.STATE_CLOSED


def _cooled_down(server: Breakerd, setup: Client, dep: str) -> None:
    """Trips ``dep`` (a short/* breaker: 1 s cooldown) and waits for its
    cooldown to end, so that the next Acquire gets the half-open probe."""
    trip(setup, dep)
    assert server.get_state(dep).state == pb.STATE_OPEN
    wait_for(
        lambda: server.get_state(dep).retry_after.ToNanoseconds() == 0
        or server.get_state(dep).state != pb.STATE_OPEN,
        10,
        "the 1 s cooldown to end",
    )


# conformance: report-while-away
def test_a_report_made_while_away_is_held_and_sent_once_breakerd_is_back(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, other = unique("short/held"), unique("away/held-other")
    setup = make_client(own_breakerd, watch=False)
    # watch off: only the away probe ends away, and the test holds it (see below).
    client = make_client(own_breakerd, decision_timeout=TIMEOUT, watch=False)
    assert setup.wait_ready(10) and client.wait_ready(10)
    _cooled_down(own_breakerd, setup, dep)
    errors_before = client.stats().report_errors

    with contextlib.ExitStack() as call:
        guard = call.enter_context(client.guard(dep))  # the probe
        assert _decided(guard).source == Source.SIDECAR and _decided(guard).probe
        assert own_breakerd.get_state(dep).state == pb.STATE_HALF_OPEN
        with own_breakerd.paused():
            assert client.acquire(other).source == Source.FAIL_OPEN  # marks it away
            assert client._sidecar.away
            # No health check until the report is made: the call ends while
            # the client still has breakerd marked away, whatever the timing.
            client._sidecar.pause()
        resumed = time.monotonic()  # SIGCONT
        try:
            assert client._sidecar.away
            call.close()  # the guarded call ends with success: its report is held
            assert len(client._held) == 1
            assert client.stats().report_errors == errors_before
        finally:
            client._sidecar.resume()

    wait_for(lambda: _closed(own_breakerd, dep), 10, "the breaker to close")
    took = time.monotonic() - resumed
    assert took <= 2.0, f"CLOSED {took:.3f} s after SIGCONT"
    assert own_breakerd.metric("breakerd_reports_total", dependency=dep, **{"class": "success"}) == 1
    assert client.stats().report_errors == errors_before
    assert len(client._held) == 0
    # No other caller is refused PROBE_IN_FLIGHT: the breaker is closed.
    decision = setup.acquire(dep)
    assert decision.allowed and decision.source == Source.SIDECAR
    setup.report(dep, decision.permit, OutcomeKind.SUCCESS)


# conformance: report-while-away
def test_an_async_guards_report_made_while_away_is_held_and_sent_once_back(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, other = unique("short/held-async"), unique("away/held-async-other")
    setup = make_client(own_breakerd, watch=False)
    client = make_client(own_breakerd, decision_timeout=TIMEOUT, watch=False)
    assert setup.wait_ready(10) and client.wait_ready(10)
    _cooled_down(own_breakerd, setup, dep)
    errors_before = client.stats().report_errors
    resumed: Optional[float] = None

    async def main() -> None:
        nonlocal resumed
        async with client.guard_async(dep) as guard:  # the probe
            assert _decided(guard).source == Source.SIDECAR and _decided(guard).probe
            with own_breakerd.paused():
                async with client.guard_async(other) as away:  # marks it away
                    assert _decided(away).source == Source.FAIL_OPEN
                assert client._sidecar.away
                client._sidecar.pause()
            resumed = time.monotonic()
            assert client._sidecar.away
        # Left with success: held, not sent, not an error.
        assert len(client._held) == 1
        assert client.stats().report_errors == errors_before

    try:
        asyncio.run(main())
    finally:
        client._sidecar.resume()
    assert resumed is not None
    wait_for(lambda: _closed(own_breakerd, dep), 10, "the breaker to close")
    took = time.monotonic() - resumed
    assert took <= 2.0, f"CLOSED {took:.3f} s after SIGCONT"
    assert own_breakerd.metric("breakerd_reports_total", dependency=dep, **{"class": "success"}) == 1
    assert client.stats().report_errors == errors_before


def test_held_reports_keep_the_newest_1024() -> None:
    held: HeldReports[int] = HeldReports()
    assert LIMIT == 1024
    dropped = sum(held.hold(i) for i in range(LIMIT + 1))
    assert dropped == 1
    taken = held.take()
    assert taken == list(range(1, LIMIT + 1))  # the oldest (0) was dropped
    assert held.take() == [] and len(held) == 0


def test_past_1024_held_the_oldest_is_dropped_and_close_drops_the_rest() -> None:
    # Nothing listens: the probe (every 600 s) never ends away.
    client = Client(f"127.0.0.1:{free_port()}", watch=False, away_probe_interval=600)
    try:
        client._sidecar.failed("test: marked away", away=True)
        assert client._sidecar.away
        for permit in range(1, LIMIT + 1):
            client.report("held/bound", permit, OutcomeKind.SUCCESS)
        assert client.stats().report_errors == 0  # held, not errors
        client.report("held/bound", LIMIT + 1, OutcomeKind.SUCCESS)
        assert client.stats().report_errors == 1  # the oldest dropped
        assert len(client._held) == LIMIT
    finally:
        client.close()
    assert client.stats().report_errors == 1 + LIMIT
    assert len(client._held) == 0


def test_a_fail_open_report_is_never_held() -> None:
    client = Client(f"127.0.0.1:{free_port()}", watch=False, away_probe_interval=600)
    try:
        client._sidecar.failed("test: marked away", away=True)
        client.report("held/none", 0, OutcomeKind.SUCCESS)
        assert len(client._held) == 0
        try:
            with client.guard("held/none") as guard:  # away: fails open at once
                assert guard.permit == 0
        except BreakerOpenError:
            raise AssertionError("refused while away with fail_mode open") from None
        assert len(client._held) == 0 and client.stats().report_errors == 0
    finally:
        client.close()
