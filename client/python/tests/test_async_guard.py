"""Issue 14, defects 2 and 5, for guard_async: a burst of a thousand tasks
is decided by breakerd (the send window: at most 32 RPCs on the wire); no
permit is lost when a task is cancelled during its Acquire; and a burst of
tasks enters the guard within about decision_timeout of a hung sidecar (no
queue behind asyncio's default executor)."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import pytest
from conftest import Breakerd, MakeClient, cpu_of_others, sidecar_decision, unique, wait_for

from breakerd import Client, Source


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


# conformance: burst
def test_a_burst_of_a_thousand_tasks_never_fails_open(
    breakerd: Breakerd, make_client: MakeClient
) -> None:
    warm = unique("async-guard/burst-warm")
    # The defaults, as an application runs them: 20 ms decision timeout, Watch on.
    client = make_client(breakerd, decision_timeout=0.02)
    assert client.wait_ready(10)
    breakerd.force_open(warm)
    wait_for(lambda: client.cached_state(warm) is not None, 10, "the Watch stream")
    tasks = 1000

    async def call(d: str, i: int) -> int:
        async with client.guard_async(d):
            return i  # the upstream answers at once

    async def burst(d: str, n: int) -> list[int]:
        return await asyncio.gather(*(call(d, i) for i in range(n)))

    def steady() -> bool:
        """A steady state, as in a service that has run for a while (gRPC's
        threads started): a small burst decided by breakerd alone."""
        before = client.stats().fail_open
        asyncio.run(burst(warm_up, 100))
        return client.stats().fail_open == before

    # A burst that fails open while other programs kept half a CPU or more
    # busy (the suites of other languages, a build) may be their doing: on a
    # two-core machine they delay breakerd or the client by more than the
    # 20 ms now and then. It is tried again (at most 5 bursts). One that
    # fails open while the machine was otherwise idle fails the test.
    busy = 0.5
    assert breakerd.proc is not None
    warm_up = unique("async-guard/burst-warm-up")
    excused: list[str] = []
    for _ in range(5):
        dep = unique("async-guard/burst")
        wait_for(steady, 10, "a burst of 100 with no decision failed open")
        before = client.stats()
        started = time.monotonic()
        with cpu_of_others(breakerd.proc.pid) as others:
            results = asyncio.run(burst(dep, tasks))
        elapsed = time.monotonic() - started
        failed_open = client.stats().fail_open - before.fail_open
        print(f"\n{tasks} tasks through guard_async: {failed_open} failed open in "
              f"{elapsed:.3f} s (other programs kept {others[0]:.2f} CPUs busy)")
        assert results == list(range(tasks)), "a call did not run or returned another's result"
        if failed_open == 0:
            break
        assert others[0] >= busy, (
            f"{failed_open} of {tasks} decisions failed open on a machine otherwise idle "
            f"(other programs kept {others[0]:.2f} CPUs busy)"
        )
        excused.append(f"{failed_open} failed open beside {others[0]:.2f} busy CPUs")
    else:
        pytest.fail(f"every burst ran on a machine kept busy by other programs: {excused}")
    allowed = breakerd.metric("breakerd_acquire_total", dependency=dep, decision="allowed")
    assert allowed == tasks
    reported = wait_for(
        lambda: (lambda r: r if r == tasks else None)(
            breakerd.metric("breakerd_reports_total", dependency=dep)
        ),
        3,
        "a report for every permit",
    )
    assert reported == tasks


# conformance: cancel-acquire
def test_task_cancelled_while_its_acquire_waits_on_a_hung_sidecar(
    own_breakerd: Breakerd, make_client: MakeClient
) -> None:
    dep = unique("async-guard/cancel-acquire")
    client = make_client(own_breakerd, decision_timeout=2.0)
    assert client.wait_ready(10)
    wait_for(lambda: sidecar_decision(client, dep), 10, "a decision from breakerd")
    allowed_before = own_breakerd.metric(
        "breakerd_acquire_total", dependency=dep, decision="allowed"
    )
    ran: list[int] = []
    gave_up_after = 0.0

    async def guarded() -> None:
        async with client.guard_async(dep):
            ran.append(1)

    async def main() -> None:
        nonlocal gave_up_after
        started = time.monotonic()
        task = asyncio.ensure_future(guarded())
        await asyncio.sleep(0.05)  # the Acquire is in flight, breakerd stopped
        task.cancel()
        cancelled = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        gave_up_after = time.monotonic() - cancelled
        await asyncio.sleep(max(0.0, started + 0.3 - time.monotonic()))

    with own_breakerd.paused():
        asyncio.run(main())  # breakerd continues 300 ms after the start

    assert gave_up_after < 0.1, f"the caller got its cancellation {gave_up_after:.3f} s late"
    assert ran == [], "the guarded function ran"
    # breakerd answers the Acquire it held with a permit: reported once, CANCELLED.
    wait_for(
        lambda: own_breakerd.reports(dep, "cancelled", "neutral") == 1, 5, "the CANCELLED report"
    )
    allowed = own_breakerd.metric("breakerd_acquire_total", dependency=dep, decision="allowed")
    assert allowed == allowed_before + 1
    time.sleep(0.2)  # nothing more arrives: reported once, no other class
    reported = own_breakerd.metric("breakerd_reports_total", dependency=dep)
    assert reported == own_breakerd.reports(dep, "cancelled", "neutral") == 1
    assert client.stats().report_errors == 0
