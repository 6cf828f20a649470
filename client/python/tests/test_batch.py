"""The batch of local decisions on its own (client/README.md, "Local
decisions"): what goes in a ReportBatch request, its bounds, resending,
and the flusher's thread with a fake RPC. No breakerd."""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Iterator

import pytest
from conftest import wait_for

from breakerd import Decision, Outcome, Source, State
from breakerd._batch import (
    FAIL_CLOSED,
    FAIL_OPEN,
    MAX_ENTRIES,
    REFUSED_LOCAL,
    LocalBatch,
    Sent,
    new_client_id,
)
from breakerd._flusher import BatchFlusher
from breakerd._proto import breaker_pb2 as pb


def grant(dependency: str = "local/a", generation: int = 1) -> Decision:
    return Decision(
        allowed=True,
        source=Source.LOCAL,
        dependency=dependency,
        state=State.CLOSED,
        generation=generation,
    )


def test_client_id_is_named_like_a_dependency_and_new_each_time() -> None:
    import os
    import re

    first, second = new_client_id(), new_client_id()
    assert re.fullmatch(rf"python-{os.getpid()}-[0-9a-f]{{8}}", first)
    assert first != second


def test_grants_and_outcomes_go_per_dependency_and_generation() -> None:
    batch = LocalBatch("python-1-00000000")
    a1, a2, b1 = grant("local/a", 1), grant("local/a", 2), grant("local/b", 1)
    for decision in (a1, a1, a2, b1):
        batch.grant(decision)
    assert batch.outcome(a1, Outcome.SUCCESS, 0.0015)
    assert batch.outcome(a1, Outcome.from_http_status(503, "7"), 2.5)
    assert batch.outcome(b1, Outcome.from_grpc_code(14), 0.0)

    request = batch.next_request()
    assert request is not None
    assert (request.client_id, request.sequence) == ("python-1-00000000", 1)
    by_key = {(d.dependency, d.generation): d for d in request.dependencies}
    assert {k: d.grants for k, d in by_key.items()} == {
        ("local/a", 1): 2,
        ("local/a", 2): 1,
        ("local/b", 1): 1,
    }
    first, second = by_key[("local/a", 1)].outcomes
    assert first.outcome == pb.OUTCOME_SUCCESS and first.latency.ToNanoseconds() == 1_500_000
    assert (second.outcome, second.http_status) == (pb.OUTCOME_UNSPECIFIED, 503)
    assert second.retry_after.ToNanoseconds() == 7_000_000_000
    assert second.latency.ToNanoseconds() == 2_500_000_000
    (only,) = by_key[("local/b", 1)].outcomes
    assert only.HasField("grpc_code") and only.grpc_code == 14
    assert not first.HasField("grpc_code") and not first.HasField("retry_after")
    assert not by_key[("local/a", 2)].outcomes
    assert batch.next_request() is request  # not acknowledged yet: the same one
    assert batch.sent(Sent.OK) == 0
    assert batch.next_request() is None and not batch.has_work()


def test_durations_are_clamped_to_what_breakerd_takes() -> None:
    batch = LocalBatch("python-1-00000000")
    a = grant()
    batch.grant(a)
    batch.outcome(a, Outcome.from_http_status(429, "999999999"), -1.0)
    request = batch.next_request()
    assert request is not None
    (outcome,) = request.dependencies[0].outcomes
    assert outcome.latency.ToNanoseconds() == 0
    assert outcome.retry_after.ToSeconds() == 24 * 3600


def test_chain_grants_count_chain_decisions_and_outcomes_carry_the_tier() -> None:
    batch = LocalBatch("python-1-00000000")
    chained = dataclasses.replace(grant("llm/b"), chain="llm", tier=1)
    batch.grant(chained)
    batch.grant(chained)
    batch.outcome(chained, Outcome.SERVER_ERROR, 0.1)
    request = batch.next_request()
    assert request is not None
    assert [(c.chain, c.none, c.tier, c.count) for c in request.chains] == [("llm", False, 1, 2)]
    (outcome,) = request.dependencies[0].outcomes
    assert (outcome.chain, outcome.tier) == ("llm", 1)


def test_at_most_a_thousand_outcomes_per_request_the_rest_next() -> None:
    batch = LocalBatch("python-1-00000000")
    a = grant()
    for _ in range(2500):
        batch.grant(a)
        assert batch.outcome(a, Outcome.SUCCESS, 0.001)
    sizes, grants = [], 0
    while (request := batch.next_request()) is not None:
        sizes.append(sum(len(d.outcomes) for d in request.dependencies))
        grants += sum(d.grants for d in request.dependencies)
        assert batch.sent(Sent.OK) == 0
    assert sizes == [1000, 1000, 500]
    assert grants == 2500


def test_more_dependencies_than_a_request_takes_wait_for_the_next() -> None:
    batch = LocalBatch("python-1-00000000")
    for i in range(MAX_ENTRIES + 5):
        batch.grant(grant(f"local/d{i}"))
        batch.count_decision(f"local/d{i}", REFUSED_LOCAL)
    first = batch.next_request()
    assert first is not None
    assert len(first.dependencies) == MAX_ENTRIES and len(first.decisions) == MAX_ENTRIES
    batch.sent(Sent.OK)
    second = batch.next_request()
    assert second is not None
    assert len(second.dependencies) == 5 and len(second.decisions) == 5
    assert second.sequence == first.sequence + 1


def test_unacknowledged_outcomes_are_bounded_and_the_excess_refused() -> None:
    batch = LocalBatch("python-1-00000000", limit=10, per_request=4)
    a = grant()
    assert all(batch.outcome(a, Outcome.SUCCESS, 0.0) for _ in range(10))
    assert not batch.outcome(a, Outcome.SUCCESS, 0.0)  # the caller counts it dropped
    assert batch.next_request() is not None  # 4 in flight, 6 queued: still 10
    assert not batch.outcome(a, Outcome.SUCCESS, 0.0)
    batch.sent(Sent.OK)  # acknowledged: room for 4 more
    assert batch.unacknowledged == 6
    assert all(batch.outcome(a, Outcome.SUCCESS, 0.0) for _ in range(4))
    assert not batch.outcome(a, Outcome.SUCCESS, 0.0)
    batch.close()
    assert batch.discard() == 10


def test_a_failed_request_is_resent_unchanged_three_times_then_dropped() -> None:
    batch = LocalBatch("python-1-00000000")
    a = grant()
    batch.grant(a)
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    request = batch.next_request()
    assert request is not None and request.sequence == 1
    wire = request.SerializeToString()
    assert batch.sent(Sent.RETRY) == 0
    batch.outcome(a, Outcome.TIMEOUT, 0.0)  # queued meanwhile: the next request's
    again = batch.next_request()
    assert again is not None and again.SerializeToString() == wire
    assert batch.sent(Sent.RETRY) == 0
    assert batch.next_request() is request
    assert batch.sent(Sent.RETRY) == 2  # the third send failed: its outcomes dropped
    following = batch.next_request()
    assert following is not None and following.sequence == 2
    assert [o.outcome for o in following.dependencies[0].outcomes] == [pb.OUTCOME_TIMEOUT]


def test_a_request_breakerd_will_never_take_is_dropped_at_once() -> None:
    batch = LocalBatch("python-1-00000000")
    a = grant()
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    assert batch.next_request() is not None
    assert batch.sent(Sent.DROP) == 1
    assert not batch.has_work()


def test_client_decisions_are_counters_per_dependency() -> None:
    batch = LocalBatch("python-1-00000000")
    for kind in (REFUSED_LOCAL, REFUSED_LOCAL, FAIL_OPEN):
        batch.count_decision("local/a", kind)
    batch.count_decision("local/b", FAIL_CLOSED)
    request = batch.next_request()
    assert request is not None and not request.dependencies
    got = {d.dependency: (d.refused_local, d.fail_open, d.fail_closed) for d in request.decisions}
    assert got == {"local/a": (2, 1, 0), "local/b": (0, 0, 1)}


class FakeSidecar:
    """The flusher's RPC and presence: records each request, answers with
    ``result``; ``away`` as the test sets it (each look counted)."""

    def __init__(self) -> None:
        self.sent: list[pb.ReportBatchRequest] = []
        self.result = Sent.OK
        self.away = False
        self.looks = 0
        self.lock = threading.Lock()

    def send(self, request: pb.ReportBatchRequest, timeout: float) -> Sent:
        with self.lock:
            copy = pb.ReportBatchRequest()
            copy.CopyFrom(request)
            self.sent.append(copy)
            return self.result

    def is_away(self) -> bool:
        with self.lock:
            self.looks += 1
            return self.away

    def requests(self) -> list[pb.ReportBatchRequest]:
        with self.lock:
            return list(self.sent)


@pytest.fixture
def sidecar() -> FakeSidecar:
    return FakeSidecar()


MakeFlusher = Callable[..., "tuple[LocalBatch, BatchFlusher, list[int]]"]


@pytest.fixture
def flusher_of(sidecar: FakeSidecar) -> Iterator[MakeFlusher]:
    """Makes a batch and its flusher over ``sidecar`` (and the list of its
    dropped counts); closes the flushers after the test."""
    made: list[BatchFlusher] = []

    def make(interval: float = 0.001) -> tuple[LocalBatch, BatchFlusher, list[int]]:
        batch = LocalBatch("python-1-00000000")
        dropped: list[int] = []
        flusher = BatchFlusher(
            batch,
            sidecar.send,
            interval=interval,
            timeout=1.0,
            away=sidecar.is_away,
            on_dropped=dropped.append,
        )
        made.append(flusher)
        return batch, flusher, dropped

    yield make
    for flusher in made:
        flusher.close(0.1)


def test_flusher_sends_what_is_queued_and_then_waits_idle(
    sidecar: FakeSidecar, flusher_of: MakeFlusher
) -> None:
    batch, _, _ = flusher_of()
    wait_for(lambda: batch.idle, 5, "the flusher to wait idle")
    a = grant()
    batch.grant(a)
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    requests = wait_for(sidecar.requests, 5, "a request")
    assert requests[0].dependencies[0].grants == 1
    wait_for(lambda: batch.idle, 5, "idle again once sent")
    assert not batch.has_work()


def test_client_decisions_made_while_away_go_when_breakerd_is_back(
    sidecar: FakeSidecar, flusher_of: MakeFlusher
) -> None:
    sidecar.away = True
    batch, flusher, _ = flusher_of()
    for _ in range(3):
        batch.count_decision("local/a", FAIL_OPEN)
    looks = sidecar.looks
    flusher.wake()
    wait_for(lambda: sidecar.looks > looks, 5, "the flusher to look at the sidecar")
    assert not batch.idle  # while away only breakerd's return wakes it
    assert sidecar.requests() == []
    with sidecar.lock:
        sidecar.away = False
    flusher.wake()  # what the client's on_back does
    (request,) = wait_for(sidecar.requests, 5, "the request after the return")
    assert [(d.dependency, d.fail_open) for d in request.decisions] == [("local/a", 3)]


def test_flusher_resends_a_failed_request_with_its_sequence_then_drops_it(
    sidecar: FakeSidecar, flusher_of: MakeFlusher
) -> None:
    sidecar.result = Sent.RETRY
    batch, _, dropped = flusher_of()
    a = grant()
    batch.grant(a)
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    wait_for(lambda: dropped, 5, "the request to be dropped")
    requests = sidecar.requests()
    assert [r.sequence for r in requests] == [1, 1, 1]
    assert len({r.SerializeToString() for r in requests}) == 1
    assert dropped == [1]


def test_close_sends_what_is_left_then_drops_the_rest(
    sidecar: FakeSidecar, flusher_of: MakeFlusher
) -> None:
    batch, flusher, dropped = flusher_of(interval=3600.0)  # only close sends
    a = grant()
    for _ in range(1500):
        batch.grant(a)
        batch.outcome(a, Outcome.SUCCESS, 0.0)
    wait_for(sidecar.requests, 5, "the full request's worth, sent at once")
    flusher.close(5.0)
    total = sum(len(d.outcomes) for r in sidecar.requests() for d in r.dependencies)
    assert total == 1500 and dropped == []
    assert not batch.outcome(a, Outcome.SUCCESS, 0.0)  # closed: the caller counts it


def test_close_while_away_drops_and_counts_the_outcomes(
    sidecar: FakeSidecar, flusher_of: MakeFlusher
) -> None:
    sidecar.away = True
    batch, flusher, dropped = flusher_of()
    a = grant()
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    batch.outcome(a, Outcome.SUCCESS, 0.0)
    flusher.close(1.0)
    assert sidecar.requests() == [] and dropped == [2]
