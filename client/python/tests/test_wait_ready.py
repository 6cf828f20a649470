"""wait_ready: at startup, wait for the connection to breakerd so the first
decisions do not fail open; bounded by its timeout when nothing listens."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from conftest import Breakerd, MakeClient, free_port, unique

from breakerd import Source

LATE_START = 0.3  # seconds before breakerd starts listening
TIMEOUT = 0.5  # wait_ready's timeout when nothing listens
SLACK = 0.25  # scheduling on a shared machine; far less than another backoff round


# conformance: wait-ready
def test_wait_ready_returns_once_breakerd_starts_and_fails_at_its_timeout(
    tmp_path: Path, make_client: MakeClient
) -> None:
    address = f"127.0.0.1:{free_port()}"
    server = Breakerd(tmp_path / "breakerd")
    client = make_client(server, target=address)
    starter = threading.Timer(LATE_START, server.start, kwargs={"listen": address})
    started = time.monotonic()
    starter.start()
    try:
        ready = client.wait_ready(10)
        waited = time.monotonic() - started
        starter.join(10)
        assert ready, "wait_ready gave up although breakerd started"
        assert waited >= LATE_START, "wait_ready returned before breakerd listened"
        decision = client.acquire(unique("wait-ready/dep"))
        assert decision.allowed and decision.source == Source.SIDECAR
    finally:
        starter.cancel()
        starter.join(10)
        server.stop()

    nothing = make_client(server, target=f"127.0.0.1:{free_port()}")
    started = time.monotonic()
    assert not nothing.wait_ready(TIMEOUT)
    waited = time.monotonic() - started
    assert TIMEOUT <= waited < TIMEOUT + SLACK, f"wait_ready({TIMEOUT}) took {waited:.3f} s"
