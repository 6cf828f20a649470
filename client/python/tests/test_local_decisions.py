"""Local decisions (client/README.md, "Local decisions"): first attempts
granted in the client while the Watch stream says the breaker is closed and
its policy allows it, their outcomes sent in ReportBatch requests. The
conformance config allows them for local/* and local-short/* only."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import (
    BreakerOpenError,
    Client,
    Decision,
    InvalidArgumentError,
    Outcome,
    OutcomeKind,
    RejectReason,
    Source,
    State,
)
from breakerd._proto import breaker_pb2 as pb

CHILD = Path(__file__).resolve().parent / "local_probe_child.py"


def handled(server: Breakerd, method: str) -> float:
    """RPCs of ``method`` breakerd has answered, every code."""
    return server.metric("breakerd_grpc_server_handled_total", method=method)


def decided(server: Breakerd, dependency: str, decision: str) -> float:
    return server.metric("breakerd_acquire_total", dependency=dependency, decision=decision)


def reported(server: Breakerd, dependency: str, cls: str) -> float:
    return server.metric("breakerd_reports_total", dependency=dependency, **{"class": cls})


def client_decisions(server: Breakerd, dependency: str, decision: str) -> float:
    return server.metric(
        "breakerd_client_decisions_total", dependency=dependency, decision=decision
    )


def fast_path_on(server: Breakerd, client: Client, dependency: str) -> Decision:
    """One guarded call (breakerd creates the breaker), then two-step
    acquires, each reported with its decision, until one is granted
    locally (the `created` event has reached the cache); waits until
    breakerd has counted that one too. Returns it."""
    with client.guard(dependency) as g:
        pass
    assert g.decision is not None and g.decision.source == Source.SIDECAR

    def local() -> Decision | None:
        decision = client.acquire(dependency)
        client.report(dependency, decision.permit, Outcome.SUCCESS, 0.001, decision=decision)
        return decision if decision.source == Source.LOCAL else None

    first = wait_for(local, 2, "a local grant")
    wait_for(lambda: decided(server, dependency, "allowed_local") == 1, 5, "the batch")
    wait_for(
        lambda: reported(server, dependency, "success") == decided(server, dependency, "allowed")
        + 1,
        5,
        "every outcome so far",
    )
    return first


# conformance: local-fast-path
def test_guarded_calls_on_a_closed_breaker_are_decided_in_the_client(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/fast-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, dep)
    rpcs = {m: handled(breakerd, m) for m in ("Acquire", "Report", "ReportBatch")}
    acquires = {
        labels["decision"]: value
        for labels, value in breakerd.samples("breakerd_acquire_total", dependency=dep)
    }
    successes = reported(breakerd, dep, "success")

    for _ in range(10_000):
        with client.guard(dep) as g:
            pass
    assert g.decision is not None and g.decision.source == Source.LOCAL
    client.close()  # flushes

    assert handled(breakerd, "Acquire") == rpcs["Acquire"], "an Acquire RPC per call"
    assert handled(breakerd, "Report") == rpcs["Report"], "a Report RPC per call"
    assert handled(breakerd, "ReportBatch") >= rpcs["ReportBatch"] + 1
    after = {
        labels["decision"]: value
        for labels, value in breakerd.samples("breakerd_acquire_total", dependency=dep)
    }
    grown = {k: v - acquires.get(k, 0) for k, v in after.items() if v != acquires.get(k, 0)}
    assert grown == {"allowed_local": 10_000}
    assert reported(breakerd, dep, "success") == successes + 10_000
    assert client.stats().dropped_outcomes == 0


# conformance: local-two-step
def test_two_step_local_grant_is_reported_through_the_decision(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/two-step-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, dep)
    reports_rpc = handled(breakerd, "Report")
    failures = reported(breakerd, dep, "server_error")

    decision = client.acquire(dep)
    assert (decision.allowed, decision.source, decision.permit, decision.state) == (
        True,
        Source.LOCAL,
        0,
        State.CLOSED,
    )
    assert decision.local_grant and not decision.probe
    started = time.monotonic()
    # Returns None, as every report does: queued for the next batch, no effect to tell.
    client.report(dep, decision.permit, OutcomeKind.SERVER_ERROR, 0.01, decision=decision)
    took = time.monotonic() - started
    assert took < 0.5, f"report of a local grant took {took:.3f} s"  # loose: no RPC
    wait_for(
        lambda: reported(breakerd, dep, "server_error") == failures + 1, 3, "the batched outcome"
    )
    assert handled(breakerd, "Report") == reports_rpc

    # The raw-permit form, given permit 0, sends nothing.
    client.report(dep, 0, OutcomeKind.SERVER_ERROR, 0.01)
    batches = handled(breakerd, "ReportBatch")
    with client.guard(dep):  # a later batch: the raw report would have gone by then
        pass
    wait_for(lambda: handled(breakerd, "ReportBatch") > batches, 3, "a later batch")
    assert reported(breakerd, dep, "server_error") == failures + 1
    assert handled(breakerd, "Report") == reports_rpc


def test_report_with_a_decision_of_another_call_is_a_programming_error(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/mismatch-python")
    client = make_client(breakerd)
    decision = fast_path_on(breakerd, client, dep)
    with pytest.raises(InvalidArgumentError, match="decision"):
        client.report("local/other", 0, Outcome.SUCCESS, decision=decision)
    with pytest.raises(InvalidArgumentError, match="decision"):
        client.report(dep, 7, Outcome.SUCCESS, decision=decision)


# conformance: local-trip
def test_failures_granted_locally_trip_the_breaker_and_turn_the_client_to_refusals(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/trip-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, dep)
    refusals_before = client.stats().local_rejections

    for _ in range(5):
        guard = client.guard(dep)
        with pytest.raises(HttpError):
            with guard:
                raise HttpError(503)
        assert guard.decision is not None and guard.decision.source == Source.LOCAL
    fifth = time.monotonic()

    made = ran = 0
    refused: BreakerOpenError | None = None
    while refused is None and time.monotonic() - fifth < 10:
        made += 1
        try:
            with client.guard(dep):
                ran += 1
        except BreakerOpenError as err:
            refused = err
            made -= 1
    took = time.monotonic() - fifth
    assert refused is not None, "never refused"
    assert (refused.source, refused.reason) == (Source.LOCAL, RejectReason.OPEN)
    assert took <= 2.0, f"refused locally {took:.3f} s after the fifth failure"
    assert ran == made, "a call granted before the refusal did not run"
    print(f"\nrefused locally {took * 1000:.1f} ms after the fifth failure ({made} calls between)")

    assert breakerd.get_state(dep).state == pb.STATE_OPEN
    assert (
        breakerd.metric(
            "breakerd_transitions_total",
            dependency=dep,
            to="open",
            reason="consecutive_failures",
        )
        == 1
    )
    for _ in range(20):
        with pytest.raises(BreakerOpenError) as more:
            with client.guard(dep):
                pass
        assert more.value.source == Source.LOCAL
    local_refusals = client.stats().local_rejections - refusals_before
    assert local_refusals == 21
    client.close()
    wait_for(
        lambda: client_decisions(breakerd, dep, "refused_local") == local_refusals,
        3,
        "breakerd to count the local refusals",
    )


# conformance: local-probe
def test_only_one_process_probes_after_a_local_trip(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local-short/probe-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, dep)
    probes = decided(breakerd, dep, "probe")
    closes = breakerd.metric(
        "breakerd_transitions_total", dependency=dep, to="closed", reason="probe_succeeded"
    )
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), breakerd.grpc_addr, dep],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(3)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            line = child.stdout.readline()  # bounded: the child has a hard timeout
            assert line.startswith("ready"), line + child.communicate(timeout=60)[1]
        for _ in range(5):
            with pytest.raises(HttpError):
                with client.guard(dep):
                    raise HttpError(503)
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    results = []
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, err
        results.append(json.loads(out.splitlines()[-1]))
    logs = "".join(err for _, err in outputs)

    for result in results:  # each waited for its cache to hold the breaker open
        assert result["refusal"]["source"] == "LOCAL" and not result["refusal"]["allowed"]
    calls = [r["call"] for r in results]
    assert sum(r["ran"] for r in results) == 1, (results, logs)
    (probe,) = [c for c in calls if c["allowed"]]
    assert probe["source"] == "SIDECAR" and probe["probe"], calls
    for call in calls:
        if not call["allowed"]:
            assert (call["source"], call["reason"]) in (
                ("SIDECAR", "PROBE_IN_FLIGHT"),
                ("LOCAL", "OPEN"),
            ), calls
    assert not [c for c in calls if c["allowed"] and c["source"] == "LOCAL"], calls
    assert decided(breakerd, dep, "probe") == probes + 1
    wait_for(
        lambda: breakerd.metric(
            "breakerd_transitions_total", dependency=dep, to="closed", reason="probe_succeeded"
        )
        == closes + 1,
        5,
        "the close by the probe",
    )


# conformance: local-stream-drop
def test_no_local_grant_once_the_stream_drops_and_fail_opens_reach_the_new_sidecar(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/drop-python")
    # A slow flush after the return: the first call after the restart must
    # find the dependency unknown to the new breakerd (the batch that counts
    # the fail-open decisions creates its breaker, whose `created` event
    # would turn the fast path on).
    client = make_client(own_breakerd, flush_interval=0.5)
    fast_path_on(own_breakerd, client, dep)

    own_breakerd.stop()
    wait_for(lambda: client.cached_state(dep) is None, 10, "the cache to be cleared")
    during = []
    for _ in range(20):
        with client.guard(dep) as g:
            pass
        assert g.decision is not None
        during.append(g.decision.source)
    assert set(during) == {Source.FAIL_OPEN}, during

    own_breakerd.restart()
    returned = time.monotonic()
    first: Decision | None = None
    while first is None and time.monotonic() - returned < 10:
        with client.guard(dep) as g:
            pass
        assert g.decision is not None
        if g.decision.source != Source.FAIL_OPEN:
            first = g.decision
        else:
            time.sleep(0.001)
    assert first is not None, "breakerd never answered after its restart"
    assert first.source == Source.SIDECAR and first.allowed, first
    assert decided(own_breakerd, dep, "allowed") == 1
    assert decided(own_breakerd, dep, "allowed_local") == 0
    fail_opens = client.stats().fail_open
    assert fail_opens >= 20
    wait_for(
        lambda: client_decisions(own_breakerd, dep, "fail_open") == fail_opens,
        3,
        "the fail-open decisions at the new breakerd",
    )


# conformance: local-off
def test_local_decisions_off_sends_every_call_to_the_sidecar(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/off-python")
    client = make_client(breakerd, local_decisions=False)
    with client.guard(dep):
        pass
    wait_for(lambda: client.cached_state(dep) == State.CLOSED, 2, "the created event")
    decision = client.acquire(dep)
    assert decision.source == Source.SIDECAR
    client.report(dep, decision.permit, Outcome.SUCCESS, 0.001, decision=decision)
    allowed, reports = decided(breakerd, dep, "allowed"), handled(breakerd, "Report")

    for _ in range(100):
        with client.guard(dep) as g:
            pass
        assert g.decision is not None and g.decision.source == Source.SIDECAR

    assert decided(breakerd, dep, "allowed") == allowed + 100
    assert decided(breakerd, dep, "allowed_local") == 0
    assert handled(breakerd, "Report") == reports + 100


def test_retries_and_async_guards_use_the_fast_path_for_first_attempts_only(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/retry-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, dep)
    assert client.acquire(dep, attempt=1).source == Source.SIDECAR  # a retry: breakerd decides

    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise HttpError(503)
        return "ok"

    acquires = handled(breakerd, "Acquire")
    assert client.retry(dep, flaky, base=0.001) == "ok"
    assert handled(breakerd, "Acquire") == acquires + 1  # the second attempt only

    async def guarded() -> Decision:
        async with client.guard_async(dep) as g:
            await asyncio.sleep(0)
        assert g.decision is not None
        return g.decision

    assert asyncio.run(guarded()).source == Source.LOCAL
    assert handled(breakerd, "Acquire") == acquires + 1


def test_a_chain_grants_its_first_candidate_locally_and_breakerd_counts_it(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    first, second = unique("local/chain-a"), unique("local/chain-b")
    chain = unique("chain-python")
    client = make_client(breakerd)
    fast_path_on(breakerd, client, first)
    answered = client.first([first, second], lambda dep: dep, chain=chain)
    assert answered == first
    wait_for(
        lambda: breakerd.metric("breakerd_chain_decisions_total", chain=chain, tier="0") == 1,
        3,
        "the chain decision",
    )
    wait_for(
        lambda: breakerd.metric("breakerd_chain_outcomes_total", chain=chain, tier="0") == 1,
        3,
        "the chain outcome",
    )
    assert decided(breakerd, first, "allowed_local") == 2


def test_outcomes_while_breakerd_is_away_are_dropped_and_counted(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("local/away-python")
    client = make_client(own_breakerd, decision_timeout=0.2)
    decision = fast_path_on(own_breakerd, client, dep)
    with own_breakerd.paused():  # hung: the stream stays, an RPC marks it away
        fail_open = client.acquire(unique("local/other"))
        assert fail_open.source == Source.FAIL_OPEN
        assert client._sidecar.away
        assert client.acquire(dep).source == Source.FAIL_OPEN  # no local grant while away
        client.report(dep, 0, Outcome.SUCCESS, 0.001, decision=decision)
        assert client.stats().dropped_outcomes == 1


def test_flush_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="flush_interval"):
        Client("127.0.0.1:1", flush_interval=0)
