"""Late, not away (client/README.md, "Sidecar away"): an Acquire that times
out while breakerd answers this client's other RPCs (a burst on a loaded
machine) fails open alone and does not mark breakerd away; one that times
out with nothing answered since it was sent does. breakerd cannot be made
slow for one call, so a stand-in Breaker service on a real loopback socket
holds the Acquires of "slow/*" and answers the others at once."""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Iterator, Optional

import grpc
import pytest
from conftest import wait_for

from breakerd import Client, Decision, OutcomeKind, Source
from breakerd._presence import SidecarPresence
from breakerd._proto import breaker_pb2 as pb

# Long enough that the fast Acquire is surely answered while the slow one
# waits, on a loaded two-core machine; each test waits it out once.
LATE_TIMEOUT = 1.0
# Only needs to time out.
AWAY_TIMEOUT = 0.3


class StandInBreaker:
    """Grants every Acquire (permits 1, 2, ...) and accepts every Report;
    holds the Acquires of "slow/*" until :meth:`release` (or 10 s)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0
        self._next_permit = 1
        self._released = threading.Event()
        self.reports: list[pb.ReportRequest] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handlers = {
            "Acquire": grpc.unary_unary_rpc_method_handler(
                self._acquire,
                request_deserializer=pb.AcquireRequest.FromString,
                response_serializer=pb.AcquireResponse.SerializeToString,
            ),
            "Report": grpc.unary_unary_rpc_method_handler(
                self._report,
                request_deserializer=pb.ReportRequest.FromString,
                response_serializer=pb.ReportResponse.SerializeToString,
            ),
        }
        service = pb.DESCRIPTOR.services_by_name["Breaker"].full_name
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, handlers),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def held(self) -> int:
        """Acquires of "slow/*" received so far."""
        with self._lock:
            return self._held

    def release(self) -> None:
        self._released.set()

    def _acquire(
        self, request: pb.AcquireRequest, context: grpc.ServicerContext
    ) -> pb.AcquireResponse:
        if request.dependency.startswith("slow/"):
            with self._lock:
                self._held += 1
            self._released.wait(10)
        with self._lock:
            permit, self._next_permit = self._next_permit, self._next_permit + 1
        return pb.AcquireResponse(allowed=True, permit=permit, state=pb.STATE_CLOSED)

    def _report(
        self, request: pb.ReportRequest, context: grpc.ServicerContext
    ) -> pb.ReportResponse:
        with self._lock:
            self.reports.append(request)
        return pb.ReportResponse()


@pytest.fixture
def stand_in() -> Iterator[StandInBreaker]:
    service = StandInBreaker()
    yield service
    service.release()
    service.server.stop(grace=None)


def _client(stand_in: StandInBreaker, timeout: float) -> Client:
    # watch off: the stand-in has no Watch (and so no message ends away).
    client = Client(f"127.0.0.1:{stand_in.port}", decision_timeout=timeout, watch=False)
    assert client.wait_ready(10)
    return client


# conformance: late-not-away
def test_a_timeout_while_other_calls_are_answered_is_not_away(
    stand_in: StandInBreaker,
) -> None:
    with _client(stand_in, LATE_TIMEOUT) as client:
        slow: list[Decision] = []
        t = threading.Thread(target=lambda: slow.append(client.acquire("slow/dep")))
        t.start()
        wait_for(lambda: stand_in.held == 1, 5, "the slow Acquire to reach the stand-in")
        # Answered while the slow one waits.
        assert client.acquire("fast/dep").source == Source.SIDECAR
        t.join(10)
        assert len(slow) == 1 and slow[0].source == Source.FAIL_OPEN and slow[0].allowed

        # Not away: the next decision and its report still go to breakerd.
        after = client.acquire("fast/dep")
        assert after.source == Source.SIDECAR and after.permit != 0
        client.report("fast/dep", after.permit, OutcomeKind.SUCCESS, 0.001)
        stats = client.stats()
        assert stats.fail_open == 1
        assert stats.away_decisions == 0
        assert stats.report_errors == 0
        assert [r.permit for r in stand_in.reports] == [after.permit]


# conformance: late-not-away
def test_a_timeout_while_other_tasks_are_answered_is_not_away(
    stand_in: StandInBreaker,
) -> None:
    with _client(stand_in, LATE_TIMEOUT) as client:

        async def source(dependency: str) -> Optional[Source]:
            async with client.guard_async(dependency) as g:
                return g.decision.source if g.decision is not None else None

        async def main() -> tuple[Optional[Source], Optional[Source], Optional[Source]]:
            slow = asyncio.ensure_future(source("slow/dep"))
            while stand_in.held < 1:
                await asyncio.sleep(0.005)
            fast = await source("fast/dep")  # answered while the slow one waits
            late = await slow
            return late, fast, await source("fast/dep")

        late, fast, after = asyncio.run(asyncio.wait_for(main(), 10))
        assert late == Source.FAIL_OPEN
        assert fast == Source.SIDECAR
        assert after == Source.SIDECAR  # not away
        stats = client.stats()
        assert stats.fail_open == 1
        assert stats.away_decisions == 0


# conformance: late-not-away
def test_a_timeout_with_nothing_answered_since_marks_away(stand_in: StandInBreaker) -> None:
    with _client(stand_in, AWAY_TIMEOUT) as client:
        assert client.acquire("fast/dep").source == Source.SIDECAR  # answered before
        assert client.acquire("slow/dep").source == Source.FAIL_OPEN
        assert client.acquire("fast/dep").source == Source.FAIL_OPEN  # away: no RPC
        assert client.stats().away_decisions == 1
        assert stand_in.held == 1


def test_a_timeout_with_nothing_answered_since_marks_the_async_path_away(
    stand_in: StandInBreaker,
) -> None:
    with _client(stand_in, AWAY_TIMEOUT) as client:

        async def source(dependency: str) -> Optional[Source]:
            async with client.guard_async(dependency) as g:
                return g.decision.source if g.decision is not None else None

        async def main() -> list[Optional[Source]]:
            return [await source(d) for d in ("fast/dep", "slow/dep", "fast/dep")]

        assert asyncio.run(main()) == [Source.SIDECAR, Source.FAIL_OPEN, Source.FAIL_OPEN]
        assert client.stats().away_decisions == 1


def test_the_away_rule_with_an_injected_clock() -> None:
    now = [100.0]
    presence = SidecarPresence(
        lambda: False, 600, target="test", fail_mode="open", clock=lambda: now[0]
    )
    try:
        assert not presence.answered_since(now[0])  # nothing answered yet
        sent_at = presence.clock()
        now[0] += 0.01
        assert not presence.answered_since(sent_at)
        presence.answered()  # an Acquire answered after the late one was sent
        assert presence.answered_since(sent_at)
        now[0] += 0.01
        later = presence.clock()
        assert not presence.answered_since(later)  # sent after the last answer
        presence.note_answer()  # a Report answered
        assert not presence.answered_since(later)  # at the same instant: not after
        now[0] += 0.01
        presence.note_answer()
        assert presence.answered_since(later)
        now[0] -= 1  # a stamp taken earlier, stored last, never moves it back
        presence.note_answer()
        assert presence.answered_since(later)
    finally:
        presence.close(1)
