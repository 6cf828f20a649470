"""Guard an HTTP GET with breakerd.

    python examples/guarded_call.py --target 127.0.0.1:50051 \\
        --dependency example/http --url http://127.0.0.1:8080/health

Exit status: 0 the call succeeded, 1 it failed (and was reported),
2 the breaker refused it (the call was not made).
"""

from __future__ import annotations

import argparse
import logging
import sys
import urllib.error
import urllib.request
from typing import Optional, Sequence

from breakerd import BreakerOpenError, Client


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="breakerd address (default $BREAKERD_ADDR or 127.0.0.1:50051)")
    parser.add_argument("--dependency", default="example/http", help="breaker name")
    parser.add_argument("--url", required=True, help="the upstream to GET")
    parser.add_argument("--timeout", type=float, default=2.0, help="the call's own timeout (s)")
    parser.add_argument(
        "--decision-timeout", type=float, default=0.02, help="breakerd's deadline (s)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    with Client(args.target, decision_timeout=args.decision_timeout) as client:
        # A long-lived service skips this; a short script waits for the
        # connection so that its one decision comes from breakerd.
        if not client.wait_ready(timeout=2.0):
            print(f"breakerd at {client.target} is not reachable: failing open")
        try:
            with client.guard(args.dependency) as guard:
                # An HTTPError (4xx/5xx), timeout or refused connection raised
                # here is classified and reported by the guard, then re-raised.
                with urllib.request.urlopen(args.url, timeout=args.timeout) as resp:
                    body = resp.read()
                    guard.set_http_status(resp.status)
        except BreakerOpenError as refused:
            print(
                f"refused by the breaker ({refused.reason.name}, source {refused.source.name}); "
                f"try again in {refused.retry_after:.1f}s"
            )
            return 2
        except (urllib.error.URLError, OSError) as failed:
            print(f"call failed: {failed}; reported as {guard.outcome}")
            return 1
    assert guard.decision is not None
    print(f"HTTP {resp.status}, {len(body)} bytes (decision from {guard.decision.source.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
