"""Outcomes: how a guarded call ended, in the terms of a breakerd Report."""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import math
import socket
import urllib.error
from dataclasses import dataclass
from typing import Any, ClassVar, Optional, Union

import grpc


class OutcomeKind(enum.IntEnum):
    """The ``breakerd.v1.Outcome`` enum.

    ``UNSPECIFIED`` means "breakerd classifies the HTTP status or gRPC code".
    """

    UNSPECIFIED = 0
    SUCCESS = 1
    TIMEOUT = 2
    CONNECTION_ERROR = 3
    SERVER_ERROR = 4
    RATE_LIMITED = 5
    BAD_REQUEST = 6
    AUTH_ERROR = 7
    CANCELLED = 8
    SOFT_FAILURE = 9


# Kinds worth another attempt: the upstream may answer differently next time.
_RETRYABLE = frozenset(
    {
        OutcomeKind.TIMEOUT,
        OutcomeKind.CONNECTION_ERROR,
        OutcomeKind.SERVER_ERROR,
        OutcomeKind.RATE_LIMITED,
    }
)

# breakerd's classification of gRPC codes (DESIGN.md "Classification"); the
# client only uses it to decide whether to retry, breakerd classifies reports.
_GRPC_KIND = {
    0: OutcomeKind.SUCCESS,  # OK
    1: OutcomeKind.CANCELLED,  # CANCELLED
    2: OutcomeKind.SERVER_ERROR,  # UNKNOWN
    3: OutcomeKind.BAD_REQUEST,  # INVALID_ARGUMENT
    4: OutcomeKind.TIMEOUT,  # DEADLINE_EXCEEDED
    5: OutcomeKind.BAD_REQUEST,  # NOT_FOUND
    6: OutcomeKind.BAD_REQUEST,  # ALREADY_EXISTS
    7: OutcomeKind.AUTH_ERROR,  # PERMISSION_DENIED
    8: OutcomeKind.RATE_LIMITED,  # RESOURCE_EXHAUSTED
    9: OutcomeKind.BAD_REQUEST,  # FAILED_PRECONDITION
    10: OutcomeKind.BAD_REQUEST,  # ABORTED
    11: OutcomeKind.BAD_REQUEST,  # OUT_OF_RANGE
    12: OutcomeKind.BAD_REQUEST,  # UNIMPLEMENTED
    13: OutcomeKind.SERVER_ERROR,  # INTERNAL
    14: OutcomeKind.CONNECTION_ERROR,  # UNAVAILABLE
    15: OutcomeKind.SERVER_ERROR,  # DATA_LOSS
    16: OutcomeKind.AUTH_ERROR,  # UNAUTHENTICATED
}

_TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    socket.timeout,
    asyncio.TimeoutError,
    concurrent.futures.TimeoutError,
)
_CANCELLED_ERRORS: tuple[type[BaseException], ...] = (
    asyncio.CancelledError,
    concurrent.futures.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
)


def _http_kind(status: int) -> OutcomeKind:
    if status < 400:
        return OutcomeKind.SUCCESS
    if status in (408, 504):
        return OutcomeKind.TIMEOUT
    if status == 429:
        return OutcomeKind.RATE_LIMITED
    if status in (401, 403):
        return OutcomeKind.AUTH_ERROR
    if status < 500:
        return OutcomeKind.BAD_REQUEST
    return OutcomeKind.SERVER_ERROR


def parse_retry_after(header: Union[str, int, float, None]) -> Optional[float]:
    """Seconds from a ``Retry-After`` header value, or None.

    Only the delay-seconds form is understood; an HTTP date, a negative or a
    malformed value gives None.
    """
    if header is None:
        return None
    try:
        seconds = float(header)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


@dataclass(frozen=True)
class Outcome:
    """What a Report says about one call. Immutable, so safe to share.

    Build one with the constants (``Outcome.SUCCESS``, ``Outcome.TIMEOUT``,
    ...), :meth:`of`, :meth:`from_http_status`, :meth:`from_grpc_code` or
    :meth:`from_exception`.

    Attributes:
        kind: the explicit class, or ``UNSPECIFIED`` to let breakerd classify
            ``http_status`` / ``grpc_code`` (so every language shares its rules).
        http_status: the upstream's HTTP status (100-599), 0 if none.
        grpc_code: the upstream's gRPC status code (0-16), None if none.
        retry_after: seconds from the upstream's Retry-After, None if none;
            an opening cooldown is at least this long.
    """

    kind: OutcomeKind = OutcomeKind.UNSPECIFIED
    http_status: int = 0
    grpc_code: Optional[int] = None
    retry_after: Optional[float] = None

    SUCCESS: ClassVar[Outcome]
    TIMEOUT: ClassVar[Outcome]
    CONNECTION_ERROR: ClassVar[Outcome]
    SERVER_ERROR: ClassVar[Outcome]
    RATE_LIMITED: ClassVar[Outcome]
    BAD_REQUEST: ClassVar[Outcome]
    AUTH_ERROR: ClassVar[Outcome]
    CANCELLED: ClassVar[Outcome]
    SOFT_FAILURE: ClassVar[Outcome]

    def __post_init__(self) -> None:
        if self.http_status and not 100 <= self.http_status <= 599:
            raise ValueError(f"http_status must be 100-599, got {self.http_status}")
        if self.grpc_code is not None and not 0 <= self.grpc_code <= 16:
            raise ValueError(f"grpc_code must be 0-16, got {self.grpc_code}")
        if (
            self.kind == OutcomeKind.UNSPECIFIED
            and not self.http_status
            and self.grpc_code is None
        ):
            raise ValueError("an Outcome needs a kind, an http_status or a grpc_code")

    @classmethod
    def of(cls, kind: OutcomeKind, retry_after: Optional[float] = None) -> Outcome:
        """An explicit outcome of ``kind``."""
        return cls(kind=OutcomeKind(kind), retry_after=retry_after)

    @classmethod
    def from_http_status(
        cls, status: int, retry_after_header: Union[str, int, float, None] = None
    ) -> Outcome:
        """An HTTP response's status (breakerd classifies it: 5xx and 408/429
        fail, other 4xx are neutral) and its Retry-After header, if any."""
        return cls(http_status=int(status), retry_after=parse_retry_after(retry_after_header))

    @classmethod
    def from_grpc_code(cls, code: Union[grpc.StatusCode, int]) -> Outcome:
        """A gRPC status code (breakerd classifies it)."""
        if isinstance(code, grpc.StatusCode):
            value: int = code.value[0]
        else:
            value = int(code)
        return cls(grpc_code=value)

    @classmethod
    def from_exception(cls, exc: BaseException) -> Outcome:
        """The outcome of a call that raised ``exc``.

        - ``asyncio.CancelledError``, ``KeyboardInterrupt``, ``SystemExit``:
          CANCELLED (neutral: the caller gave up);
        - ``grpc.RpcError`` carrying a code: that code;
        - an exception with ``.status_code`` or ``.response.status_code``
          (requests, httpx, most SDKs) and ``urllib.error.HTTPError``: that HTTP
          status, with the response's Retry-After header if present;
        - ``TimeoutError``, ``socket.timeout``, ``asyncio.TimeoutError``, or any
          exception class named ``*Timeout*`` (requests, httpx, aiohttp): TIMEOUT;
        - ``ConnectionError`` or a class named ``*ConnectError``/``*ConnectionError``:
          CONNECTION_ERROR; a ``urllib.error.URLError`` by its ``reason``;
        - anything else: SERVER_ERROR.
        """
        if isinstance(exc, _CANCELLED_ERRORS):
            return cls.CANCELLED
        if isinstance(exc, grpc.RpcError):
            code = getattr(exc, "code", None)
            status = code() if callable(code) else None
            if isinstance(status, grpc.StatusCode):
                return cls.from_grpc_code(status)
        http = _http_status_of(exc)
        if http is not None:
            return cls.from_http_status(http[0], http[1])
        if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
            return cls.from_exception(exc.reason)
        if isinstance(exc, _TIMEOUT_ERRORS) or _named(exc, ("Timeout",)):
            return cls.TIMEOUT
        if isinstance(exc, ConnectionError) or _named(exc, ("ConnectError", "ConnectionError")):
            return cls.CONNECTION_ERROR
        return cls.SERVER_ERROR

    @property
    def classified(self) -> OutcomeKind:
        """The class breakerd gives this outcome (explicit kind first, then the
        HTTP status, then the gRPC code)."""
        if self.kind != OutcomeKind.UNSPECIFIED:
            return self.kind
        if self.http_status:
            return _http_kind(self.http_status)
        assert self.grpc_code is not None
        return _GRPC_KIND[self.grpc_code]

    @property
    def retryable(self) -> bool:
        """True for timeouts, connection errors, server errors and rate limits;
        False for success, soft failure, bad request, auth error, cancelled."""
        return self.classified in _RETRYABLE


for _kind in OutcomeKind:
    if _kind != OutcomeKind.UNSPECIFIED:
        setattr(Outcome, _kind.name, Outcome(kind=_kind))


def _named(exc: BaseException, fragments: tuple[str, ...]) -> bool:
    return any(f in klass.__name__ for klass in type(exc).__mro__ for f in fragments)


def _http_status_of(exc: BaseException) -> Optional[tuple[int, Optional[str]]]:
    """(status, Retry-After header) of an HTTP error exception, if it has one."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code, _header(exc.headers, "Retry-After")
    candidates: list[Any] = [exc, getattr(exc, "response", None)]
    for obj in candidates:
        status = getattr(obj, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
            headers = getattr(obj, "headers", None)
            if headers is None and obj is exc:
                headers = getattr(getattr(exc, "response", None), "headers", None)
            return status, _header(headers, "Retry-After")
    return None


def _header(headers: Any, name: str) -> Optional[str]:
    get = getattr(headers, "get", None)
    if get is None:
        return None
    value = get(name)
    return value if isinstance(value, str) else None
