"""Sidecar away: after an Acquire times out, decisions fail open at once with
no RPC until a health check (or a Watch message) shows breakerd is back.
breakerd is paused with SIGSTOP (a hung sidecar: its sockets stay open)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from conftest import Breakerd, MakeClient, logged, sidecar_decision, unique, wait_for

from breakerd import BreakerOpenError, Client, Decision, OutcomeKind, Source

# Long enough to be a clear timeout on a shared two-core machine, short
# enough that the one RPC that discovers the hang costs little.
TIMEOUT = 0.3
PROBE_THREAD = "breakerd-away-probe"


def _probe_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == PROBE_THREAD)


def test_hung_sidecar_is_away_until_the_health_probe_answers(
    own_breakerd: Breakerd, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="breakerd")
    dep = unique("away/hung")
    client = make_client(own_breakerd, decision_timeout=TIMEOUT)
    assert client.wait_ready(10)
    wait_for(lambda: sidecar_decision(client, dep), 10, "a first answer from breakerd")
    assert _probe_threads() == 0, "a probe runs while breakerd is present"
    before = client.stats()
    logged_before = (logged(caplog, "cannot answer"), logged(caplog, "answers again"))

    with own_breakerd.paused():
        first = client.acquire(dep)  # the one RPC that finds breakerd hung
        assert first.allowed and first.source == Source.FAIL_OPEN and first.permit == 0
        after_first = client.stats()
        assert after_first.fail_open == before.fail_open + 1
        assert after_first.away_decisions == before.away_decisions  # it tried the RPC

        more = 5
        decisions: list[Decision] = [client.acquire(dep) for _ in range(more)]
        assert all(d.allowed and d.source == Source.FAIL_OPEN for d in decisions)
        away = client.stats()
        assert away.away_decisions == after_first.away_decisions + more, "an RPC was attempted"
        assert away.fail_open == after_first.fail_open + more
        assert _probe_threads() == 1

    # Resumed: within a bounded poll the probe finds it, the next acquire
    # goes to breakerd again, and the probe thread ends.
    wait_for(lambda: sidecar_decision(client, dep), 3, "an answer from breakerd after SIGCONT")
    wait_for(lambda: _probe_threads() == 0, 3, "the probe thread to end")
    logged_after = (logged(caplog, "cannot answer"), logged(caplog, "answers again"))
    assert logged_after == (logged_before[0] + 1, logged_before[1] + 1), "logged per call"


def test_while_away_reports_are_held_and_acquire_first_fails_open(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, spare = unique("away/report"), unique("away/spare")
    client = make_client(own_breakerd, decision_timeout=TIMEOUT, watch=False)
    assert client.wait_ready(10)
    granted = wait_for(
        lambda: sidecar_decision(client, dep),
        10,
        "a permit from breakerd",
    )
    assert granted.permit != 0

    with own_breakerd.paused():
        assert client.acquire(dep).source == Source.FAIL_OPEN  # now away
        before = client.stats()
        client.report(dep, granted.permit, OutcomeKind.SUCCESS, 0.01)
        first = client.acquire_first([dep, spare])
        assert first.allowed and first.source == Source.FAIL_OPEN and first.dependency == dep
        assert client.first([dep, spare], lambda d: d) == dep
        after = client.stats()
        assert after.report_errors == before.report_errors  # held, not an error
        assert after.away_decisions == before.away_decisions + 2

    wait_for(lambda: sidecar_decision(client, dep), 3, "an answer from breakerd after SIGCONT")
    # The report made while away reached breakerd once it was back.
    wait_for(
        lambda: own_breakerd.metric("breakerd_reports_total", dependency=dep) == 1,
        3,
        "the held report to reach breakerd",
    )
    assert client.stats().report_errors == before.report_errors


def test_fail_closed_while_away(own_breakerd: Breakerd, make_client: MakeClient) -> None:
    dep = unique("away/closed")
    client = make_client(own_breakerd, decision_timeout=TIMEOUT, fail_mode="closed", watch=False)
    assert client.wait_ready(10)
    wait_for(lambda: sidecar_decision(client, dep), 10, "a first answer from breakerd")
    before = client.stats()
    with own_breakerd.paused():
        assert client.acquire(dep).source == Source.FAIL_CLOSED
        ran = False
        with pytest.raises(BreakerOpenError) as refused:
            with client.guard(dep):
                ran = True
        assert not ran and refused.value.source == Source.FAIL_CLOSED
        after = client.stats()
        assert after.fail_closed == before.fail_closed + 2
        assert after.away_decisions == before.away_decisions + 1
        assert after.fail_open == 0
    wait_for(lambda: sidecar_decision(client, dep), 3, "an answer from breakerd after SIGCONT")


def test_a_watch_message_ends_away_without_waiting_for_the_probe(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep, other = unique("away/watched"), unique("away/other")
    # A probe interval far longer than the test: only the stream can end away.
    client = make_client(own_breakerd, decision_timeout=TIMEOUT, away_probe_interval=600)
    assert client.wait_ready(10)
    wait_for(lambda: sidecar_decision(client, dep), 10, "a first answer from breakerd")
    with own_breakerd.paused():
        assert client.acquire(dep).source == Source.FAIL_OPEN
    away_before = client.stats().away_decisions
    assert client.acquire(dep).source == Source.FAIL_OPEN  # still away after SIGCONT
    assert client.stats().away_decisions == away_before + 1

    own_breakerd.force_open(other)  # a transition: the stream delivers it
    wait_for(lambda: client.cached_state(other) is not None, 10, "the Watch event")
    assert client.acquire(dep).source == Source.SIDECAR
    assert client.stats().away_decisions == away_before + 1
    wait_for(lambda: _probe_threads() == 0, 3, "the probe thread to end")


def test_close_stops_the_probe_while_away(own_breakerd: Breakerd) -> None:
    dep = unique("away/close")
    client = Client(own_breakerd.grpc_addr, decision_timeout=TIMEOUT, watch=False)
    try:
        assert client.wait_ready(10)
        wait_for(lambda: sidecar_decision(client, dep), 10, "a first answer from breakerd")
        with own_breakerd.paused():
            assert client.acquire(dep).source == Source.FAIL_OPEN
            assert _probe_threads() == 1
            client.close()
            assert _probe_threads() == 0
    finally:
        client.close()


# conformance: hung-sidecar
@pytest.mark.parametrize("fail_mode", ["open", "closed"])
def test_hung_sidecar_costs_one_timeout_then_decisions_take_no_rpc(
    fail_mode: str, own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("away/hung-conformance")
    client = make_client(own_breakerd, decision_timeout=0.02, fail_mode=fail_mode)  # defaults
    expected = Source.FAIL_OPEN if fail_mode == "open" else Source.FAIL_CLOSED
    assert client.wait_ready(10)
    wait_for(lambda: sidecar_decision(client, dep), 10, "a decision from breakerd")
    before = client.stats()
    acquires_before = own_breakerd.acquires(dep)
    calls = 100

    with own_breakerd.paused():
        started = time.monotonic()
        first = client.acquire(dep)
        took = time.monotonic() - started
        assert first.source == expected
        assert took < 0.02 + 0.1, f"the first acquire took {took:.3f} s"

        started = time.monotonic()
        decisions = [client.acquire(dep) for _ in range(calls)]
        took = time.monotonic() - started
        assert {d.source for d in decisions} == {expected}
        assert took < 0.1, f"{calls} acquires while away took {took:.3f} s"
        after = client.stats()
        assert after.away_decisions == before.away_decisions + calls
        if fail_mode == "open":
            assert after.fail_open == before.fail_open + 1 + calls
        else:
            assert after.fail_closed == before.fail_closed + 1 + calls
            assert after.fail_open == before.fail_open
        resumed = time.monotonic()  # SIGCONT on leaving the block

    back = wait_for(lambda: sidecar_decision(client, dep), 10, "a decision from breakerd")
    took = time.monotonic() - resumed
    assert back.allowed
    assert took <= 1.5, f"decisions came from breakerd again {took:.3f} s after SIGCONT"
    # None of the 100 reached breakerd: at most the one that found it hung,
    # and after SIGCONT those not decided away (timed out, or answered).
    end = client.stats()
    failed_after = end.fail_open + end.fail_closed - after.fail_open - after.fail_closed
    sent_after = failed_after - (end.away_decisions - after.away_decisions) + 1
    assert own_breakerd.acquires(dep) - acquires_before <= 1 + sent_after
