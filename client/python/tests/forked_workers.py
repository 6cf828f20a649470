"""A pre-fork server in miniature, run by test_fork.py in its own interpreter
(grpc reads GRPC_ENABLE_FORK_SUPPORT when it is imported).

    python forked_workers.py TARGET DEPENDENCY FORCED LATER WORKERS

The master makes a Client, a guarded call, waits until its Watch stream has
FORCED as FORCED_OPEN, then forks WORKERS children with os.fork(). Each
child, under a hard SIGALRM timeout, makes a guarded call (it must be
SIDECAR), waits until its own Watch stream shows FORCED as FORCED_OPEN and
is refused locally, says so, then waits for the test to force-close FORCED
and force-open LATER, and for its Watch stream to say so (LATER refused
locally, FORCED decided by breakerd). The master prints "ready" once every
child has said how it is, waits for a line on stdin (the test changes
FORCED and LATER meanwhile), lets the children go on, makes one more
guarded call and prints one JSON line: each child's exit status (-N:
killed by signal N) and what the master saw.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Callable

from breakerd import Client, Source, State

CHILD_TIMEOUT = 30  # seconds; a hung child dies by SIGALRM
# Exit codes of a child.
OK, NOT_SIDECAR, NO_WATCH, STALE_REFUSAL, REFUSED_CLEARLY, MISSED_LATER = 0, 3, 4, 5, 6, 7


def _until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _child(client: Client, dep: str, forced: str, later: str, ready_w: int, go_r: int) -> int:
    signal.alarm(CHILD_TIMEOUT)
    try:
        with client.guard(dep) as g:
            pass
    except RuntimeError as err:  # grpc's fork support is off: refused clearly
        print(f"child {os.getpid()}: {err}", file=sys.stderr)
        os.write(ready_w, b"x")
        return REFUSED_CLEARLY
    if g.decision is None or g.decision.source != Source.SIDECAR:
        os.write(ready_w, b"x")
        return NOT_SIDECAR
    if not _until(lambda: client.cached_state(forced) == State.FORCED_OPEN, 10):
        os.write(ready_w, b"x")
        return NO_WATCH
    refused = client.acquire(forced)
    os.write(ready_w, b"r" if refused.source == Source.LOCAL and not refused.allowed else b"x")
    os.read(go_r, 1)  # EOF: the test has force-closed FORCED and force-opened LATER
    if not _until(lambda: client.cached_state(forced) == State.FORCED_CLOSED, 5):
        return STALE_REFUSAL
    decision = client.acquire(forced)
    if not (decision.allowed and decision.source == Source.SIDECAR):
        return STALE_REFUSAL
    if not _until(lambda: client.cached_state(later) == State.FORCED_OPEN, 5):
        return MISSED_LATER
    refused = client.acquire(later)
    return OK if refused.source == Source.LOCAL and not refused.allowed else MISSED_LATER


def main() -> None:
    signal.alarm(2 * CHILD_TIMEOUT)  # a hung master dies too: the test never waits forever
    target, dep, forced, later = sys.argv[1:5]
    workers = int(sys.argv[5])
    client = Client(target, decision_timeout=2.0)
    assert client.wait_ready(10)
    with client.guard(dep) as g:
        pass
    master_before = g.decision.source.name if g.decision else "none"
    assert _until(lambda: client.cached_state(forced) == State.FORCED_OPEN, 10)

    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(go_w)
            signal.alarm(0)  # the child sets its own
            code = 1
            try:
                code = _child(client, dep, forced, later, ready_w, go_r)
            finally:
                os._exit(code)
        children.append(pid)
    os.close(ready_w)
    os.close(go_r)

    said = b""
    while len(said) < workers:
        chunk = os.read(ready_r, workers)
        if not chunk:  # every child gone
            break
        said += chunk
    print("ready", said.decode(), flush=True)
    sys.stdin.readline()  # the test force-closed FORCED and force-opened LATER
    os.close(go_w)

    statuses = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        statuses.append(
            os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        )
    with client.guard(dep) as g:
        pass
    master_after = g.decision.source.name if g.decision else "none"
    client.close()
    print(json.dumps({"children": statuses, "said": said.decode(),
                      "master": [master_before, master_after]}), flush=True)


if __name__ == "__main__":
    main()
