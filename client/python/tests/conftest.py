"""Fixtures: a real breakerd child process, its /metrics, its Admin service."""

from __future__ import annotations

import os

# grpcio 1.80-1.83 (the last line for Python 3.9) can crash a child forked
# by subprocess while a channel is active (grpc/grpc#43055); these tests
# spawn breakerd and the example that way. Set before grpc is imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import contextlib
import json
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

import grpc
import pytest
from google.protobuf.message import Message

from breakerd import Client
from breakerd._proto import breaker_pb2 as pb

T = TypeVar("T")
M = TypeVar("M", bound=Message)

CONFIG = """\
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 30s, max: 60s, jitter: 0 }
policies:
  - match: "short/*"
    cooldown: { base: 1s, max: 2s, jitter: 0 }
  - match: "payments/*"
    mode: shadow
    consecutive_failures: 3
"""
TOKEN = "test-token-" + uuid.uuid4().hex
# Generous: the suite may share two cores with other languages' suites.
DECISION_TIMEOUT = 2.0
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def wait_for(
    predicate: Callable[[], Optional[T]], timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll ``predicate`` until it returns a truthy value (bounded)."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is stopped (state T in /proc)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] != "T":
                return False
    return True


def unique(prefix: str) -> str:
    """A dependency name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def trip(client: Client, dep: str, status: int = 503) -> None:
    """Three failed guarded calls: consecutive_failures 3 (the test config)
    opens the breaker."""
    for _ in range(3):
        with pytest.raises(HttpError):
            with client.guard(dep):
                raise HttpError(status)


class Breakerd:
    """One breakerd child process on free loopback ports."""

    def __init__(self, workdir: Path) -> None:
        binary = os.environ.get("BREAKERD_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            pytest.fail(f"BREAKERD_BIN={binary!r} is not an executable breakerd binary")
        self.binary = binary
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "config.yaml").write_text(CONFIG)
        (workdir / "token").write_text(TOKEN + "\n")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.grpc_addr = ""
        self.metrics_addr = ""
        self._channel: Optional[grpc.Channel] = None
        self._starts = 0

    def start(self, listen: str = "127.0.0.1:0") -> None:
        self._starts += 1
        log_path = self.workdir / f"stderr-{self._starts}.log"
        with open(log_path, "wb") as log:  # a file never fills like a pipe
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--listen={listen}",
                    "--metrics-listen=127.0.0.1:0",
                    f"--config={self.workdir / 'config.yaml'}",
                    f"--admin-token-file={self.workdir / 'token'}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

        def serving() -> Optional[dict[str, str]]:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"breakerd exited with {self.proc.returncode}: {log_path.read_text()}"
                )
            for line in log_path.read_text().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "serving":
                    return dict(event)
            return None

        event = wait_for(serving, 10.0, "breakerd's serving log line")
        self.grpc_addr = event["grpc"].split(",")[0]
        self.metrics_addr = event["metrics"]
        if self._channel is not None:
            self._channel.close()
        self._channel = grpc.insecure_channel(self.grpc_addr)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)  # a paused one could not stop
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crashed sidecar would."""
        self.stop(signal.SIGKILL)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """SIGSTOP for the block, as a hung or throttled sidecar: its sockets
        stay open but nothing answers. Always resumed (SIGCONT) on leaving."""
        assert self.proc is not None
        pid = self.proc.pid
        self.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: _stopped(pid), 5, "breakerd to stop")
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def reload(self, config: str) -> None:
        """Replace the config file and make breakerd reload it (SIGHUP)."""
        assert self.proc is not None
        (self.workdir / "config.yaml").write_text(config)
        self.proc.send_signal(signal.SIGHUP)

    # -- observing breakerd ------------------------------------------------

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        url = f"http://{self.metrics_addr}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if not match or match.group(1) != name:
                continue
            have = dict(_LABEL.findall(match.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(match.group(3))
        return total

    def reports(self, dependency: str, cls: str, effect: str) -> float:
        return self.metric(
            "breakerd_reports_total", dependency=dependency, **{"class": cls, "effect": effect}
        )

    def acquires(self, dependency: str) -> float:
        return self.metric("breakerd_acquire_total", dependency=dependency)

    def _unary(self, service: str, method: str, request: Message, response: type[M]) -> M:
        assert self._channel is not None
        call = self._channel.unary_unary(
            f"/breakerd.v1.{service}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        metadata = (("authorization", f"Bearer {TOKEN}"),) if service == "Admin" else None
        result: M = call(request, timeout=5, metadata=metadata)
        return result

    def get_state(self, dependency: str) -> pb.BreakerStatus:
        return self._unary(
            "Breaker", "GetState", pb.GetStateRequest(dependency=dependency), pb.BreakerStatus
        )

    def force_open(self, dependency: str) -> None:
        self._unary(
            "Admin", "ForceOpen", pb.ForceOpenRequest(dependency=dependency), pb.AdminResponse
        )

    def force_close(self, dependency: str) -> None:
        self._unary(
            "Admin", "ForceClose", pb.ForceCloseRequest(dependency=dependency), pb.AdminResponse
        )

    def unimplemented_error(self) -> grpc.RpcError:
        """A real grpc.RpcError (UNIMPLEMENTED) from breakerd."""
        assert self._channel is not None
        call = self._channel.unary_unary("/breakerd.v1.Breaker/NoSuchMethod", None, None)
        try:
            call(b"", timeout=5)
        except grpc.RpcError as err:
            return err
        raise AssertionError("NoSuchMethod answered")


@pytest.fixture(scope="session")
def breakerd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Breakerd]:
    """One breakerd shared by the tests that do not stop it (each test uses
    its own dependency names)."""
    server = Breakerd(tmp_path_factory.mktemp("breakerd-shared"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_breakerd(tmp_path: Path) -> Iterator[Breakerd]:
    """A breakerd for a test that kills or restarts it."""
    server = Breakerd(tmp_path / "breakerd")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def make_client() -> Iterator[Callable[..., Client]]:
    """Builds Clients for a Breakerd (generous decision_timeout unless given);
    closes them after the test."""
    clients: list[Client] = []

    def make(server: Breakerd, **kwargs: Any) -> Client:
        kwargs.setdefault("decision_timeout", DECISION_TIMEOUT)
        client = Client(server.grpc_addr, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


class HttpError(Exception):
    """An HTTP client's error for a response (requests/httpx style)."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
