"""Fixtures and helpers shared by the tests: a real breakerd child process,
its /metrics and Admin service, a holder of its port while it is down, the
clients made for a test, and the CPU other programs take meanwhile."""

from __future__ import annotations

import os

# grpcio 1.80-1.83 (the last line for Python 3.9) can crash a child forked
# by subprocess while a channel is active (grpc/grpc#43055); these tests
# spawn breakerd and the example that way. Set before grpc is imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import contextlib
import json
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

import grpc
import pytest
from google.protobuf.message import Message

from breakerd import Client, Decision, Source
from breakerd._proto import breaker_pb2 as pb

T = TypeVar("T")
M = TypeVar("M", bound=Message)

# The config every client's suite starts breakerd with.
CONFIG = (Path(__file__).resolve().parents[2] / "conformance" / "breakerd.yaml").read_text()
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


def free_port() -> int:
    """A loopback port nothing listens on (free when asked)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sidecar_decision(client: Client, dependency: str) -> Optional[Decision]:
    """An acquire's decision if breakerd made it, else None (for wait_for)."""
    decision = client.acquire(dependency)
    return decision if decision.source == Source.SIDECAR else None


def _busy_ticks() -> int:
    """CPU time the whole machine has spent busy, in clock ticks."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return sum(fields[:8]) - idle - iowait  # user nice system idle iowait irq softirq steal


def _process_ticks(pid: int) -> int:
    """CPU time process ``pid`` has used (all its threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime stime


@contextlib.contextmanager
def cpu_of_others(*pids: int) -> Iterator[list[float]]:
    """Measures, while the block runs, how many CPUs the processes other
    than this one and ``pids`` kept busy on average (the list's one item,
    set on leaving). On a shared machine other programs' work delays every
    process now and then by tens of milliseconds, whatever the client does."""
    ours = (os.getpid(), *pids)
    ticks = os.sysconf("SC_CLK_TCK")
    busy, mine, started = _busy_ticks(), sum(map(_process_ticks, ours)), time.monotonic()
    others: list[float] = []
    try:
        yield others
    finally:
        elapsed = max(time.monotonic() - started, 1 / ticks)
        theirs = _busy_ticks() - busy - (sum(map(_process_ticks, ours)) - mine)
        others.append(max(0, theirs) / ticks / elapsed)


def logged(caplog: pytest.LogCaptureFixture, text: str) -> int:
    """How many lines of the client's logger contain ``text``."""
    return sum(1 for r in caplog.records if r.name == "breakerd" and text in r.getMessage())


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

    def crash(self) -> PortHolder:
        """Kill breakerd (SIGKILL) and hold its port with a listener that
        counts the client's connection attempts (see :class:`PortHolder`);
        :meth:`restart` after releasing it."""
        self.kill()
        host, port = self.grpc_addr.rsplit(":", 1)
        return wait_for(
            lambda: PortHolder.bind(host, int(port)), 10, "the killed breakerd's port to be free"
        )

    def restart(self) -> None:
        """Start again on the same address (retried while the port is not
        yet free)."""
        address = self.grpc_addr
        deadline = time.monotonic() + 10
        while True:
            try:
                self.start(listen=address)
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

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

    def samples(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        """The samples of ``name`` whose labels include ``labels``: each
        one's labels and value, from one scrape of /metrics."""
        url = f"http://{self.metrics_addr}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        found = []
        for line in text.splitlines():
            match = _SAMPLE.match(line)
            if not match or match.group(1) != name:
                continue
            have = dict(_LABEL.findall(match.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                found.append((have, float(match.group(3))))
        return found

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return sum(value for _, value in self.samples(name, **labels))

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

    def acquire(self, dependency: str, attempt: int = 0) -> pb.AcquireResponse:
        """breakerd's own Acquire, with no client in between."""
        return self._unary(
            "Breaker",
            "Acquire",
            pb.AcquireRequest(dependency=dependency, attempt=attempt),
            pb.AcquireResponse,
        )

    def report(self, dependency: str, permit: int, outcome: pb.Outcome) -> pb.ReportResponse:
        """breakerd's own Report of an explicit outcome, with no client in between."""
        return self._unary(
            "Breaker",
            "Report",
            pb.ReportRequest(dependency=dependency, permit=permit, outcome=outcome),
            pb.ReportResponse,
        )

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


class PortHolder:
    """A listener on a crashed breakerd's port that accepts and at once
    closes each connection, recording when it came: the client's connection
    attempts, so a test can restart breakerd right after one of them."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.attempts: queue.Queue[float] = queue.Queue()  # time.monotonic() of each
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="port-holder", daemon=True)
        self._thread.start()

    @classmethod
    def bind(cls, host: str, port: int) -> Optional[PortHolder]:
        """A holder of ``host:port``, or None while it is not free yet."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            return None
        sock.listen(64)
        sock.settimeout(0.02)
        return cls(sock)

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.attempts.put(time.monotonic())
            conn.close()

    def release(self) -> None:
        """Frees the port (idempotent)."""
        self._done.set()
        self._thread.join(5)
        self._sock.close()


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


MakeClient = Callable[..., Client]
"""The type of the ``make_client`` fixture."""


@pytest.fixture
def make_client() -> Iterator[MakeClient]:
    """Builds Clients for a Breakerd (its address unless ``target`` is
    given; a generous decision_timeout unless given); closes them after
    the test."""
    clients: list[Client] = []

    def make(server: Breakerd, **kwargs: Any) -> Client:
        kwargs.setdefault("decision_timeout", DECISION_TIMEOUT)
        kwargs.setdefault("target", server.grpc_addr)
        client = Client(**kwargs)
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
