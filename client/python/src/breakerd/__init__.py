"""Python client for breakerd, the circuit-breaker sidecar.

Ask before each call to an upstream dependency, report how it went::

    from breakerd import Client

    client = Client()                      # $BREAKERD_ADDR or 127.0.0.1:50051
    with client.guard("payments/api") as g:
        g.set_http_status(requests.post(url).status_code)

See :class:`Client` for the whole API; everything here is thread-safe.
"""

from ._client import DEFAULT_TARGET, AsyncGuard, Client, Guard
from ._outcome import Outcome, OutcomeKind, parse_retry_after
from ._types import (
    BreakerOpenError,
    ClientClosedError,
    Decision,
    InvalidArgumentError,
    RejectReason,
    Source,
    State,
    Stats,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TARGET",
    "AsyncGuard",
    "BreakerOpenError",
    "Client",
    "ClientClosedError",
    "Decision",
    "Guard",
    "InvalidArgumentError",
    "Outcome",
    "OutcomeKind",
    "RejectReason",
    "Source",
    "State",
    "Stats",
    "parse_retry_after",
]
