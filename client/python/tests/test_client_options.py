"""Client options: target resolution, unix sockets, closing."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest
from conftest import Breakerd, unique

from breakerd import DEFAULT_TARGET, Client, Source


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


def test_closed_client_refuses_to_work(breakerd: Breakerd) -> None:
    client = Client(breakerd.grpc_addr, decision_timeout=2.0)
    assert client.wait_ready(5.0)
    client.close()
    client.close()  # idempotent
    with pytest.raises(RuntimeError):
        client.acquire(unique("closed/dep"))


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
