"""Outcome helpers, without breakerd."""

from __future__ import annotations

import asyncio
import email.message
import io
import socket
import urllib.error
from typing import Optional

import grpc
import pytest

from breakerd import Outcome, OutcomeKind, parse_retry_after


class _Response:
    def __init__(self, status_code: int, retry_after: Optional[str] = None) -> None:
        self.status_code = status_code
        self.headers = {"Retry-After": retry_after} if retry_after else {}


class _RequestsStyleError(Exception):
    def __init__(self, response: Optional[_Response]) -> None:
        super().__init__("HTTP error")
        self.response = response


class _SdkError(Exception):
    status_code = 529


class ReadTimeout(Exception):  # named like requests'/httpx's timeouts
    pass


class ConnectError(Exception):  # named like httpx's connect error
    pass


class _FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def test_http_status_keeps_status_and_retry_after() -> None:
    outcome = Outcome.from_http_status(503, "7")
    assert (outcome.kind, outcome.http_status, outcome.retry_after) == (
        OutcomeKind.UNSPECIFIED,
        503,
        7.0,
    )
    assert outcome.classified == OutcomeKind.SERVER_ERROR and outcome.retryable
    assert Outcome.from_http_status(200).classified == OutcomeKind.SUCCESS
    assert Outcome.from_http_status(404).classified == OutcomeKind.BAD_REQUEST
    assert Outcome.from_http_status(403).classified == OutcomeKind.AUTH_ERROR
    assert Outcome.from_http_status(504).classified == OutcomeKind.TIMEOUT
    assert Outcome.from_http_status(429).classified == OutcomeKind.RATE_LIMITED
    assert not Outcome.from_http_status(404).retryable
    with pytest.raises(ValueError):
        Outcome.from_http_status(700)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("120", 120.0), (" 2 ", 2.0), (3, 3.0), ("Wed, 21 Oct 2015 07:28:00 GMT", None),
     ("-1", None), ("nan", None), (None, None)],
)
def test_retry_after_takes_the_seconds_form(header: object, seconds: Optional[float]) -> None:
    assert parse_retry_after(header) == seconds  # type: ignore[arg-type]


def test_grpc_code() -> None:
    outcome = Outcome.from_grpc_code(grpc.StatusCode.UNAVAILABLE)
    assert outcome.grpc_code == 14 and outcome.kind == OutcomeKind.UNSPECIFIED
    assert outcome.classified == OutcomeKind.CONNECTION_ERROR
    assert Outcome.from_grpc_code(0).classified == OutcomeKind.SUCCESS
    assert Outcome.from_grpc_code(grpc.StatusCode.NOT_FOUND).classified == OutcomeKind.BAD_REQUEST
    assert not Outcome.from_grpc_code(grpc.StatusCode.CANCELLED).retryable
    with pytest.raises(ValueError):
        Outcome.from_grpc_code(17)


def _http_error(code: int, retry_after: Optional[str]) -> urllib.error.HTTPError:
    headers = email.message.Message()
    if retry_after:
        headers["Retry-After"] = retry_after
    return urllib.error.HTTPError("http://x/", code, "err", headers, io.BytesIO())


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError(), Outcome.TIMEOUT),
        (socket.timeout(), Outcome.TIMEOUT),
        (asyncio.TimeoutError(), Outcome.TIMEOUT),
        (ReadTimeout(), Outcome.TIMEOUT),
        (ConnectionRefusedError(), Outcome.CONNECTION_ERROR),
        (ConnectError(), Outcome.CONNECTION_ERROR),
        (urllib.error.URLError(ConnectionRefusedError()), Outcome.CONNECTION_ERROR),
        (asyncio.CancelledError(), Outcome.CANCELLED),
        (KeyboardInterrupt(), Outcome.CANCELLED),
        (_FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED), Outcome.from_grpc_code(4)),
        (_RequestsStyleError(_Response(429, "3")), Outcome.from_http_status(429, "3")),
        (_RequestsStyleError(None), Outcome.SERVER_ERROR),
        (_SdkError(), Outcome.from_http_status(529)),
        (_http_error(404, None), Outcome.from_http_status(404)),
        (_http_error(503, "10"), Outcome.from_http_status(503, "10")),
        (ValueError("boom"), Outcome.SERVER_ERROR),
    ],
)
def test_from_exception(exc: BaseException, expected: Outcome) -> None:
    assert Outcome.from_exception(exc) == expected


def test_explicit_outcomes() -> None:
    assert Outcome.of(OutcomeKind.SOFT_FAILURE) == Outcome.SOFT_FAILURE
    assert not Outcome.SOFT_FAILURE.retryable and not Outcome.SUCCESS.retryable
    assert Outcome.RATE_LIMITED.retryable and Outcome.CONNECTION_ERROR.retryable
    with pytest.raises(ValueError):
        Outcome()  # nothing to report
