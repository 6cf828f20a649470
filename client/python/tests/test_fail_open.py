"""Required test 3: with breakerd gone, decisions fail open (or closed)
promptly, and the Watch cache is cleared when the stream drops."""

from __future__ import annotations

import logging
import time

import pytest
from conftest import Breakerd, MakeClient, logged, unique, wait_for

from breakerd import BreakerOpenError, Client, Decision, Source, State

PROMPT = 0.5  # seconds: a generous bound, not a benchmark


def _timed_acquire(client: Client, dep: str) -> tuple[Decision, float]:
    start = time.monotonic()
    decision = client.acquire(dep)
    return decision, time.monotonic() - start


def test_fail_open_and_closed_when_breakerd_is_killed(
    own_breakerd: Breakerd, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="breakerd")
    dep = unique("failopen/forced")
    client = make_client(own_breakerd, decision_timeout=0.02)  # the default
    closed = make_client(own_breakerd, decision_timeout=0.02, fail_mode="closed")
    own_breakerd.force_open(dep)
    wait_for(lambda: client.cached_state(dep) == State.FORCED_OPEN, 10, "FORCED_OPEN event")
    assert client.acquire(dep).source == Source.LOCAL

    own_breakerd.kill()

    # The stream dropped: the cache is cleared, nothing is refused LOCAL.
    # Both clients' streams: each learns of it on its own thread (CI once
    # ran `closed`'s acquire before its stream had noticed).
    wait_for(lambda: client.cached_state(dep) is None, 10, "the cache to be cleared")
    wait_for(lambda: closed.cached_state(dep) is None, 10, "closed's cache to be cleared")
    before = client.stats()
    decision, elapsed = _timed_acquire(client, dep)
    assert decision.allowed and decision.source == Source.FAIL_OPEN
    assert decision.permit == 0
    assert elapsed < PROMPT
    after = client.stats()
    assert after.fail_open == before.fail_open + 1
    assert after.local_rejections == before.local_rejections

    ran = False
    with client.guard(dep) as g:  # the guarded call runs
        ran = True
    assert ran and g.decision is not None and g.decision.source == Source.FAIL_OPEN
    assert client.stats().report_errors == before.report_errors, "a permit-0 report was sent"
    # the fallback chain uses the first dependency when failing open
    assert client.first(["failopen/a", "failopen/b"], lambda d: d) == "failopen/a"
    assert client.stats().fail_open == before.fail_open + 3
    assert logged(caplog, "cannot answer") == 1, "logged per call, not once"

    decision, elapsed = _timed_acquire(closed, dep)
    assert not decision.allowed and decision.source == Source.FAIL_CLOSED
    assert elapsed < PROMPT
    ran = False
    with pytest.raises(BreakerOpenError) as refused:
        with closed.guard(dep):
            ran = True
    assert not ran and refused.value.source == Source.FAIL_CLOSED
    assert closed.stats().fail_closed == 2
    assert closed.stats().fail_open == 0


def test_fail_open_within_decision_timeout_when_breakerd_hangs(
    own_breakerd: Breakerd, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="breakerd")
    dep = unique("failopen/hung")
    client = make_client(own_breakerd, decision_timeout=0.05, watch=False)
    assert client.wait_ready(10)
    wait_for(lambda: client.acquire(dep).source == Source.SIDECAR, 10, "a first answer")
    fail_open_before = client.stats().fail_open
    with own_breakerd.paused():  # up, but never answers
        decision, elapsed = _timed_acquire(client, dep)
    assert decision.allowed and decision.source == Source.FAIL_OPEN
    assert elapsed < PROMPT
    assert client.stats().fail_open == fail_open_before + 1
    # and back to the sidecar once it answers again
    wait_for(lambda: client.acquire(dep).source == Source.SIDECAR, 10, "breakerd to answer")
    # one line when it stops answering, one when it is back: not one per call
    assert logged(caplog, "cannot answer") == logged(caplog, "answers again") >= 1


def test_invalid_argument_is_raised_not_failed_open(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    from breakerd import InvalidArgumentError

    client = make_client(own_breakerd)
    deps = [unique(f"failopen/many{i}") for i in range(1000)]
    with pytest.raises(InvalidArgumentError):  # breakerd caps the list length
        client.acquire_first(deps)
    assert client.stats().fail_open == 0
