"""One of the `local-probe` scenario's other processes (test_local_decisions.py),
run with ``sys.executable``:

    python local_probe_child.py TARGET DEPENDENCY

With its own Client (default options, but the suite's generous
decision_timeout: a loaded machine must not fail the probe's Acquire
open), it says "ready" once connected,
waits until its Watch cache holds DEPENDENCY open and an acquire is refused
locally, sleeps until that refusal's retry_after has passed, then makes one
guarded call that takes 300 ms and succeeds. Prints one JSON line: the
first refusal and the guarded call's decision (and whether the call ran).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import time

from breakerd import BreakerOpenError, Client, Decision, State

TIMEOUT = 30  # seconds; a hung child dies by SIGALRM


def _said(decision: Decision) -> dict[str, object]:
    return {
        "allowed": decision.allowed,
        "source": decision.source.name,
        "reason": decision.reason.name,
        "state": decision.state.name,
        "probe": decision.probe,
    }


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="child: %(message)s")
    signal.alarm(TIMEOUT)
    target, dependency = sys.argv[1:3]
    client = Client(target, decision_timeout=2.0)
    if not client.wait_ready(10):
        raise SystemExit("breakerd not reachable")
    print("ready", flush=True)
    deadline = time.monotonic() + 20
    while client.cached_state(dependency) != State.OPEN:
        if time.monotonic() > deadline:
            raise SystemExit("the cache never held the breaker open")
        time.sleep(0.005)
    refusal = client.acquire(dependency)
    time.sleep(refusal.retry_after + 0.01)
    ran = False
    guard = client.guard(dependency)
    try:
        with guard:
            ran = True
            time.sleep(0.3)
    except BreakerOpenError:
        pass
    assert guard.decision is not None
    client.close()
    stats = dataclasses.asdict(client.stats())
    print(json.dumps({"refusal": _said(refusal), "call": _said(guard.decision), "ran": ran,
                      "stats": stats}))


if __name__ == "__main__":
    main()
