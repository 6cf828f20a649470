"""Local decisions across a fork, run by test_fork.py in its own interpreter
(grpc reads GRPC_ENABLE_FORK_SUPPORT when it is imported):

    python forked_local.py TARGET DEPENDENCY WORKERS CALLS

The master makes a Client whose batches wait long (flush_interval 60 s),
gets DEPENDENCY's fast path on, and makes CALLS guarded calls granted
locally, still queued in its batch when it forks WORKERS children. Each
child, under a hard SIGALRM timeout, makes CALLS guarded calls, closes its
client (which sends its batches) and writes one JSON line to a pipe: its
client id and the sources of its decisions. The master then closes its
client and prints one JSON line: every process's client id and pid, the
successes each reported, each child's exit status.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter

from breakerd import Client, Outcome, Source

TIMEOUT = 30  # seconds; a hung process dies by SIGALRM


def _guarded_calls(client: Client, dependency: str, calls: int) -> Counter[str]:
    sources: Counter[str] = Counter()
    for _ in range(calls):
        with client.guard(dependency) as g:
            pass
        assert g.decision is not None
        sources[g.decision.source.name] += 1
    return sources


def _child(client: Client, dependency: str, calls: int, out: int) -> int:
    signal.alarm(TIMEOUT)
    sources = _guarded_calls(client, dependency, calls)
    client_id = client._batch.client_id
    client.close()
    line = {
        "pid": os.getpid(),
        "client_id": client_id,
        "sources": sources,
        "dropped": client.stats().dropped_outcomes,
    }
    os.write(out, (json.dumps(line) + "\n").encode())
    return 0


def main() -> None:
    signal.alarm(2 * TIMEOUT)
    target, dependency = sys.argv[1:3]
    workers, calls = int(sys.argv[3]), int(sys.argv[4])
    client = Client(target, decision_timeout=2.0, flush_interval=60.0)
    assert client.wait_ready(10)
    successes = 0
    with client.guard(dependency):
        successes += 1
    deadline = time.monotonic() + 10
    while True:  # until the `created` event reaches the cache
        decision = client.acquire(dependency)
        client.report(dependency, decision.permit, Outcome.SUCCESS, 0.001, decision=decision)
        successes += 1
        if decision.source == Source.LOCAL:
            break
        assert time.monotonic() < deadline, "no local grant"
        time.sleep(0.005)
    master = _guarded_calls(client, dependency, calls)
    assert master["LOCAL"] == calls, master
    successes += calls
    queued = client._batch.unacknowledged  # what the fork copies into each child
    master_id = client._batch.client_id

    read_end, write_end = os.pipe()
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            signal.alarm(0)  # the child sets its own
            code = 1
            try:
                code = _child(client, dependency, calls, write_end)
            finally:
                os._exit(code)
        children.append(pid)
    os.close(write_end)
    statuses = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        statuses.append(os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
    with os.fdopen(read_end) as lines:
        said = [json.loads(line) for line in lines]
    client.close()  # the master's queued batch goes now, once
    print(
        json.dumps(
            {
                "master": {"pid": os.getpid(), "client_id": master_id, "queued": queued},
                "master_successes": successes,
                "master_dropped": client.stats().dropped_outcomes,
                "children": said,
                "statuses": statuses,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
