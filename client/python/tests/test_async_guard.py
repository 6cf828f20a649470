"""Issue 14, defect 5: guard_async loses no permit when its task is cancelled
during the Acquire, and a burst of tasks enters the guard within about
decision_timeout of a hung sidecar (no queue behind asyncio's default
executor)."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from typing import Callable

from conftest import Breakerd, unique, wait_for

from breakerd import Client, Source

MakeClient = Callable[..., Client]


def test_task_cancelled_during_acquire_reports_its_permit_once(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-guard/cancelled-acquire")
    client = make_client(breakerd, watch=False)
    assert client.wait_ready(10)
    tasks = 300
    entered = 0

    async def guarded_sleep() -> None:
        nonlocal entered
        async with client.guard_async(dep):
            entered += 1
            await asyncio.sleep(30)

    async def one(i: int) -> None:
        try:
            # Timeouts from 0 to 3 ms: most tasks are cancelled while their
            # Acquire is queued or in flight, a few inside the block.
            await asyncio.wait_for(guarded_sleep(), timeout=(i % 4) * 0.001)
        except asyncio.TimeoutError:
            pass

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(tasks)))

    asyncio.run(main())

    def allowed() -> float:
        return breakerd.metric("breakerd_acquire_total", dependency=dep, decision="allowed")

    def settled() -> bool:
        return allowed() == breakerd.metric("breakerd_reports_total", dependency=dep)

    wait_for(settled, 10, "a report for every permit breakerd granted")
    granted = allowed()
    print(f"\n{tasks} tasks: {granted:.0f} permits granted, {entered} entered the block; "
          f"every permit reported once, CANCELLED")
    assert granted > entered, "no acquire was cancelled in flight: the test proves nothing"
    assert breakerd.reports(dep, "cancelled", "neutral") == granted
    assert client.stats().report_errors == 0
    time.sleep(0.2)  # nothing more arrives: each permit was reported once
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == granted


def test_hung_sidecar_lets_a_thousand_tasks_enter_the_guard_quickly(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-guard/hung")
    client = make_client(own_breakerd, decision_timeout=0.1, watch=False)
    assert client.wait_ready(10)
    wait_for(lambda: client.acquire(dep).source == Source.SIDECAR, 10, "an answer")
    tasks = 1000
    waits: list[float] = []
    sources: set[Source] = set()

    async def one(release: asyncio.Event) -> None:
        started = time.monotonic()
        async with client.guard_async(dep) as g:
            waits.append(time.monotonic() - started)
            assert g.decision is not None
            sources.add(g.decision.source)
            await release.wait()

    async def main() -> None:
        # The application's own blocking work in asyncio's default executor
        # must not delay the breaker.
        busy = threading.Event()
        loop = asyncio.get_running_loop()
        hogs = [loop.run_in_executor(None, busy.wait, 10) for _ in range(64)]
        release = asyncio.Event()
        entering = [asyncio.ensure_future(one(release)) for _ in range(tasks)]
        deadline = time.monotonic() + 5
        while len(waits) < tasks and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        release.set()
        busy.set()
        await asyncio.gather(*entering, *hogs)

    with own_breakerd.paused():
        asyncio.run(main())
    waits.sort()
    p50, worst = statistics.median(waits), waits[-1]
    print(f"\n{tasks} tasks entered guard_async with breakerd hung: "
          f"p50 {p50 * 1000:.1f} ms, p99 {waits[int(tasks * 0.99)] * 1000:.1f} ms, "
          f"max {worst * 1000:.1f} ms (decision_timeout 100 ms)")
    assert len(waits) == tasks
    assert sources == {Source.FAIL_OPEN}
    assert worst < 0.5, f"max time to enter the guard {worst:.3f}s"
    wait_for(lambda: client.acquire(dep).source == Source.SIDECAR, 5, "breakerd back")
