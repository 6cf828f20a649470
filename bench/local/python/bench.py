"""bench/local for the Python client: a guarded no-op call with local
decisions on, the same through the sidecar (local decisions off),
pybreaker's CircuitBreaker.call around the same no-op, breakerd's CPU per
call on both paths, and the trip reaction. Run by run.sh against a breakerd
of bench/local/breakerd.yaml:

    python bench.py ADDR BREAKERD_PID OUT.json [--smoke]

Each call is timed alone (time.perf_counter_ns around it) after a warm-up;
figures in ns, the trip reaction in ms. See bench/local/lib.sh and the
brief in client/README.md ("Local decisions").
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
import time
from typing import Callable

import pybreaker

from breakerd import BreakerOpenError, Client, OutcomeKind, Source

_now = time.perf_counter_ns
# Generous: on a loaded machine (the bench shares its cores) an Acquire
# slower than the default 20 ms would fail open and time nothing but that.
DECISION_TIMEOUT = 1.0


def noop() -> None:
    return None


def timed(call: Callable[[], object], warmup: int, calls: int) -> dict[str, int]:
    """Median and p99 (ns) of ``calls`` calls, each timed alone."""
    for _ in range(warmup):
        call()
    samples = [0] * calls
    for i in range(calls):
        started = _now()
        call()
        samples[i] = _now() - started
    samples.sort()
    return {
        "median": samples[calls // 2],
        "p99": samples[min(calls - 1, (calls * 99) // 100)],
        "calls": calls,
    }


def cpu_ns(pid: int) -> int:
    """breakerd's CPU time so far (utime + stime), in ns."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # fields 14 and 15 of the whole line
    return ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def wait_local(client: Client, dependency: str, timeout: float = 5.0) -> None:
    """Until ``client`` grants ``dependency`` in process (its cache has the
    `created` event). The grants on the way are reported CANCELLED, which
    counts neither way (a trip sample's failures must stay consecutive)."""
    deadline = time.monotonic() + timeout
    while True:
        decision = client.acquire(dependency)
        client.report(dependency, decision.permit, OutcomeKind.CANCELLED, 0.0, decision=decision)
        if decision.source is Source.LOCAL and decision.allowed:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: no local grant for {dependency} in {timeout} s")
        time.sleep(0.001)


def guarded(client: Client, dependency: str) -> Callable[[], None]:
    def call() -> None:
        with client.guard(dependency):
            noop()

    return call


def settle() -> None:
    """Lets the batches and RPCs of a phase land before breakerd's CPU is read."""
    time.sleep(0.1)


def local_phase(addr: str, pid: int, warmup: int, calls: int) -> tuple[dict[str, int], float]:
    client = Client(addr, decision_timeout=DECISION_TIMEOUT)
    client.wait_ready(10)
    dependency = "bench/local"
    with client.guard(dependency):
        pass
    wait_local(client, dependency)
    call = guarded(client, dependency)
    for _ in range(warmup):
        call()
    settle()
    before = cpu_ns(pid)
    figures = timed(call, 0, calls)
    client.close()  # the last batch lands before close returns
    cpu = (cpu_ns(pid) - before) / calls
    dropped = client.stats().dropped_outcomes
    if dropped:
        print(f"bench: local phase: {dropped} outcomes dropped", file=sys.stderr)
    return figures, cpu


def rpc_phase(addr: str, pid: int, warmup: int, calls: int) -> tuple[dict[str, int], float]:
    client = Client(addr, decision_timeout=DECISION_TIMEOUT, local_decisions=False)
    client.wait_ready(10)
    call = guarded(client, "bench/rpc")
    for _ in range(warmup):
        call()
    settle()
    before = cpu_ns(pid)
    figures = timed(call, 0, calls)
    settle()
    cpu = (cpu_ns(pid) - before) / calls
    stats = client.stats()
    client.close()
    if stats.fail_open:
        print(f"bench: rpc phase: {stats.fail_open} decisions failed open", file=sys.stderr)
    return figures, cpu


def peer_phase(warmup: int, calls: int) -> dict[str, int]:
    breaker = pybreaker.CircuitBreaker(fail_max=5, reset_timeout=30)
    return timed(lambda: breaker.call(noop), warmup, calls)


def trip_sample(client: Client, addr: str, n: int) -> float:
    """One trip reaction (ms): five failed guarded calls through ``client``
    on a fresh dependency, then each of ``client`` and a second client in
    this process loops guarded no-op calls until one is refused locally;
    the later refusal, from the fifth failure's return."""
    dependency = f"trip/{n}"
    with client.guard(dependency):
        pass
    wait_local(client, dependency)
    observer = Client(addr, decision_timeout=DECISION_TIMEOUT)
    try:
        observer.wait_ready(10)
        wait_local(observer, dependency)
        # Its Watch snapshot holds every earlier sample's breaker, in no
        # order: the sample starts once the observer has taken it all in (a
        # client of a pod is not still reading its first snapshot when a
        # breaker trips; read while the caller's loop holds the GIL, each
        # message would cost a switch interval, 5 ms).
        deadline = time.monotonic() + 10
        while any(observer.cached_state(f"trip/{i}") is None for i in range(n)):
            if time.monotonic() > deadline:
                raise SystemExit("bench: the observer's Watch snapshot is incomplete")
            time.sleep(0.001)
        for _ in range(5):
            guard = client.guard(dependency)
            try:
                with guard:
                    raise RuntimeError("the upstream failed")  # a server error
            except RuntimeError:
                pass
            assert guard.decision is not None and guard.decision.source is Source.LOCAL
        t0 = _now()
        refused = [0, 0]  # when each client was first refused locally (0: not yet)
        clients = (client, observer)
        deadline = t0 + 10_000_000_000
        while not (refused[0] and refused[1]):
            for i in (0, 1):
                if refused[i]:
                    continue
                try:
                    with clients[i].guard(dependency):
                        noop()
                except BreakerOpenError as err:
                    if err.source is Source.LOCAL:
                        refused[i] = _now()
            if _now() > deadline:
                raise SystemExit(f"bench: {dependency} never refused locally in 10 s")
        return (max(refused) - t0) / 1e6
    finally:
        observer.close()


def percentile(sorted_values: list[float], p: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def main() -> None:
    addr, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    smoke = "--smoke" in sys.argv[4:]
    local_calls, rpc_calls, samples = (2_000, 500, 5) if smoke else (200_000, 20_000, 100)

    peer = peer_phase(min(local_calls, 20_000), local_calls)
    local, local_cpu = local_phase(addr, pid, min(local_calls, 20_000), local_calls)
    rpc, rpc_cpu = rpc_phase(addr, pid, min(rpc_calls, 2_000), rpc_calls)

    client = Client(addr, decision_timeout=DECISION_TIMEOUT)
    client.wait_ready(10)
    in_order = [trip_sample(client, addr, n) for n in range(samples)]
    client.close()
    print(f"bench: trip reactions (ms): {[round(r, 1) for r in in_order]}", file=sys.stderr)
    reactions = sorted(in_order)

    result = {
        "language": "python",
        "peer": f"pybreaker {importlib.metadata.version('pybreaker')}",
        "runtime": f"{platform.python_implementation().lower()}{platform.python_version()}",
        "guarded_call_ns": {"local": local, "rpc": rpc, "peer": peer},
        "sidecar_cpu_ns_per_call": {"local": round(local_cpu), "rpc": round(rpc_cpu)},
        "trip_reaction_ms": {
            "p50": round(percentile(reactions, 0.5), 2),
            "p99": round(percentile(reactions, 0.99), 2),
            "max": round(reactions[-1], 2),
            "samples": len(reactions),
        },
    }
    with open(out, "w") as f:
        json.dump(result, f)
        f.write("\n")


if __name__ == "__main__":
    main()
