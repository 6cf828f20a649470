"""Client options: target resolution, unix sockets, closing."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from conftest import Breakerd, unique

from breakerd import DEFAULT_TARGET, Client, ClientClosedError, OutcomeKind, Source


def test_target_defaults_to_env_then_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BREAKERD_ADDR", raising=False)
    with Client(watch=False) as client:
        assert client.target == DEFAULT_TARGET == "127.0.0.1:50051"
    monkeypatch.setenv("BREAKERD_ADDR", "unix:/run/breakerd.sock")
    with Client(watch=False) as client:
        assert client.target == "unix:/run/breakerd.sock"
    with Client("127.0.0.1:1", watch=False) as client:
        assert client.target == "127.0.0.1:1"
    with pytest.raises(ValueError):
        Client(fail_mode="sometimes")  # type: ignore[arg-type]


def test_unix_socket_target() -> None:
    with tempfile.TemporaryDirectory(prefix="bdpy-") as short:  # sun_path is short
        server = Breakerd(Path(short))
        server.start(listen=f"unix:{short}/breakerd.sock")
        try:
            assert server.grpc_addr.startswith("unix:")
            with Client(server.grpc_addr, decision_timeout=2.0) as client:
                decision = client.acquire(unique("unix/dep"))
                assert decision.allowed and decision.source == Source.SIDECAR
        finally:
            server.stop()


# conformance: closed
def test_a_closed_client_fails_at_once_with_no_rpc(breakerd: Breakerd) -> None:
    dep, spare = unique("closed/dep"), unique("closed/spare")
    client = Client(breakerd.grpc_addr, decision_timeout=2.0)
    assert client.wait_ready(5.0)
    granted = client.acquire(dep)
    assert granted.source == Source.SIDECAR and granted.permit
    acquires_before = breakerd.acquires(dep)
    client.close()
    client.close()  # closing twice is fine
    ran: list[str] = []

    async def call() -> str:
        ran.append("async")
        return "ran"

    attempts: dict[str, Callable[[], object]] = {
        "acquire": lambda: client.acquire(dep),
        "acquire_first": lambda: client.acquire_first([dep, spare]),
        "guard": lambda: client.guard(dep).__enter__(),
        "retry": lambda: client.retry(dep, lambda: ran.append("retry")),
        "first": lambda: client.first([dep, spare], ran.append),
        "wait_ready": lambda: client.wait_ready(5.0),
        "guard_async": lambda: asyncio.run(client.guard_async(dep).__aenter__()),
        "retry_async": lambda: asyncio.run(client.retry_async(dep, call)),
        "first_async": lambda: asyncio.run(client.first_async([dep], lambda d: call())),
    }
    for name, attempt in attempts.items():
        started = time.monotonic()
        with pytest.raises(ClientClosedError, match="breakerd client is closed"):
            attempt()
        assert time.monotonic() - started < 0.5, f"{name} did not fail at once"
    assert issubclass(ClientClosedError, RuntimeError)
    assert ran == []

    client.report(dep, granted.permit, OutcomeKind.SUCCESS, 0.01)  # dropped, never raised
    stats = client.stats()
    assert stats.report_errors == 1
    assert (stats.fail_open, stats.fail_closed, stats.away_decisions) == (0, 0, 0)
    assert breakerd.acquires(dep) == acquires_before, "an Acquire reached breakerd"
    assert breakerd.acquires(spare) == 0
    assert breakerd.metric("breakerd_reports_total", dependency=dep) == 0


def test_one_client_shared_by_threads(breakerd: Breakerd) -> None:
    deps = [unique(f"threads/d{i}") for i in range(4)]
    per_thread = 50

    def work(index: int) -> None:
        for n in range(per_thread):
            with client.guard(deps[index % len(deps)]) as g:
                if n % 5 == 0:
                    g.set_http_status(404)  # neutral: never trips the breaker

    with Client(breakerd.grpc_addr, decision_timeout=5.0) as client:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        stats = client.stats()
    total = sum(breakerd.metric("breakerd_reports_total", dependency=d) for d in deps)
    assert total == 8 * per_thread
    assert sum(breakerd.reports(d, "bad_request", "neutral") for d in deps) == 8 * per_thread / 5
    assert (stats.fail_open, stats.report_errors, stats.local_rejections) == (0, 0, 0)
