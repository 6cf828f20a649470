"""Gentle recovery: a breaker that its probe closed admits a rising share of
first attempts and no retry while it ramps; its refusals (REJECT_REASON_RAMP)
are refusals like any other."""

from __future__ import annotations

import pytest
from conftest import Breakerd, HttpError, MakeClient, unique, wait_for

from breakerd import BreakerOpenError, RejectReason, Source, State
from breakerd._proto import breaker_pb2 as pb


def ramp_up(breakerd: Breakerd, dep: str) -> None:
    """Opens ``dep`` (a ramp/* breaker: 3 failures, 1 s cooldown) over gRPC
    and closes it with a successful probe once its cooldown has passed."""
    for _ in range(3):
        granted = breakerd.acquire(dep)
        assert granted.allowed
        breakerd.report(dep, granted.permit, pb.OUTCOME_SERVER_ERROR)
    assert breakerd.get_state(dep).state == pb.STATE_OPEN

    def probe() -> bool:
        granted = breakerd.acquire(dep)
        if not granted.probe:
            return False
        breakerd.report(dep, granted.permit, pb.OUTCOME_SUCCESS)
        return True

    wait_for(probe, 10, f"the probe of {dep}")
    status = breakerd.get_state(dep)
    assert status.state == pb.STATE_CLOSED
    assert 0 < status.admit_share < 1, status


# conformance: ramp
def test_a_ramp_refusal_is_a_refusal_from_the_sidecar(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("ramp/py")
    client = make_client(breakerd)
    ramp_up(breakerd, dep)

    retry = client.acquire(dep, 1)
    assert not retry.allowed and retry.permit == 0, retry
    assert retry.reason == RejectReason.RAMP, retry
    assert retry.source == Source.SIDECAR, retry
    assert retry.state == State.CLOSED, retry

    calls = 0

    def always_503() -> None:
        nonlocal calls
        calls += 1
        raise HttpError(503)

    with pytest.raises(BreakerOpenError) as refused:
        client.retry(dep, always_503, max_attempts=3, base=0.001, max_backoff=0.005)
    assert calls <= 1, "the first attempt at most"
    assert refused.value.reason == RejectReason.RAMP
    assert refused.value.source == Source.SIDECAR


def test_every_reject_reason_of_the_wire_has_its_own_value() -> None:
    """A reason breakerd sends that the enum lacked would read as
    UNSPECIFIED: a refusal without a reason."""
    wire = {name: number for name, number in pb.RejectReason.items()}
    mine = {f"REJECT_REASON_{r.name}": r.value for r in RejectReason}
    assert mine == wire
    assert RejectReason(pb.REJECT_REASON_RAMP) is RejectReason.RAMP
