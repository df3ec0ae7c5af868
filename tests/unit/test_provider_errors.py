"""Provider error mapping (`activities.models.anthropic_errors`, with `transport_failures`):
which failures the run retries.

A model call's exception becomes a `ProviderFailure`: rate limits, overload, server
errors, timeouts and dropped connections are retried (after the wait the server asks
for, if any); bad requests, auth and permission errors end the run at once.
"""

from __future__ import annotations

import email.utils
import time

import aiohttp
import anthropic
import h11
import httpx
import httpx2
import pytest

from duragent.activities.models.anthropic_errors import classify
from duragent.activities.models.transport_failures import interruption, retry_after_ms

pytestmark = pytest.mark.fast

# The SDK speaks HTTP through httpx2 (a fork of httpx with the same API).
REQUEST = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")


def status_error(
    status: int, message: str = "boom", headers: dict[str, str] | None = None
) -> anthropic.APIStatusError:
    body = {"type": "error", "error": {"type": "some_error", "message": message}}
    response = httpx2.Response(status, headers=headers or {}, json=body, request=REQUEST)
    return anthropic.APIStatusError(message, response=response, body=body)


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (400, "bad_request", False),
        (401, "auth", False),
        (403, "permission", False),
        (404, "not_found", False),
        (408, "timeout", True),
        (409, "server", True),
        (413, "bad_request", False),
        (429, "rate_limit", True),
        (500, "server", True),
        (503, "server", True),
        (529, "overloaded", True),
        (418, "other", False),
    ],
)
def test_status_decides_kind_and_retry(status: int, kind: str, retryable: bool) -> None:
    failure = classify(status_error(status))
    assert failure is not None
    assert (failure.kind, failure.status, failure.retryable) == (kind, status, retryable)
    assert failure.message == f"{status} some_error: boom"


def test_a_prompt_too_long_is_a_context_overflow() -> None:
    failure = classify(status_error(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    assert failure is not None
    assert (failure.kind, failure.retryable) == ("context_overflow", False)


def test_a_body_without_an_error_object_keeps_the_sdk_message() -> None:
    response = httpx2.Response(500, text="upstream died", request=REQUEST)
    failure = classify(anthropic.APIStatusError("upstream died", response=response, body=None))
    assert failure is not None
    assert failure.message == "500 upstream died"


def test_retryable_failures_carry_the_wait_the_server_asks_for() -> None:
    failure = classify(status_error(429, headers={"retry-after": "7"}))
    assert failure is not None and failure.retry_after_ms == 7000
    failure = classify(status_error(529, headers={"retry-after-ms": "1500"}))
    assert failure is not None and failure.retry_after_ms == 1500


def test_failures_not_retried_ignore_retry_after() -> None:
    failure = classify(status_error(400, headers={"retry-after": "7"}))
    assert failure is not None and failure.retry_after_ms is None


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after-ms": "250"}, 250),
        ({"retry-after-ms": "12.7"}, 12),
        ({"retry-after-ms": "-5"}, 0),
        ({"retry-after-ms": "soon", "retry-after": "2"}, 2000),  # a bad ms value falls back
        ({"retry-after": "0.5"}, 500),
        ({"retry-after": "-1"}, 0),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: int | None) -> None:
    assert retry_after_ms(httpx2.Headers(headers)) == expected


def test_retry_after_as_an_http_date() -> None:
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    waited = retry_after_ms(httpx2.Headers({"retry-after": later}))
    assert waited is not None and 28_000 <= waited <= 30_000
    earlier = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert retry_after_ms(httpx2.Headers({"retry-after": earlier})) == 0


def test_timeouts_and_lost_connections_are_retried() -> None:
    timeout = classify(anthropic.APITimeoutError(request=REQUEST))
    assert timeout is not None
    assert (timeout.kind, timeout.status, timeout.retryable) == ("timeout", None, True)
    lost = classify(anthropic.APIConnectionError(message="connection refused", request=REQUEST))
    assert lost is not None
    assert (lost.kind, lost.retryable) == ("network", True)
    assert lost.message.startswith("network error: ")


def sdk_wrapped(cause: Exception) -> anthropic.APIConnectionError:
    """A failure mid-stream as SDK 2.17 on raises it: its own error, caused by httpx's."""
    wrapped = (
        anthropic.APITimeoutError(request=REQUEST)
        if isinstance(cause, httpx2.TimeoutException)
        else anthropic.APIConnectionError(message=f"Connection failed: {cause}", request=REQUEST)
    )
    wrapped.__cause__ = cause
    return wrapped


CUTS: list[Exception] = [
    httpx.RemoteProtocolError("peer closed connection without sending complete message"),
    httpx2.ReadError(""),
    httpx2.RemoteProtocolError("incomplete chunked read"),
    ConnectionResetError("reset by peer"),
]


@pytest.mark.parametrize("wrapped", [False, True], ids=["sdk-2.16", "sdk-2.17"])
@pytest.mark.parametrize(
    "cause", CUTS, ids=["httpx-protocol", "httpx2-read", "httpx2-protocol", "os-connection"]
)
def test_a_stream_cut_mid_way_is_a_retryable_network_failure(
    cause: Exception, wrapped: bool
) -> None:
    cut = interruption(sdk_wrapped(cause) if wrapped else cause)
    assert cut is not None and not cut.timed_out
    failure = classify(cut)
    assert failure is not None
    assert (failure.kind, failure.retryable) == ("network", True)
    # The same words whichever SDK version raised it.
    assert failure.message == f"stream interrupted: {str(cause) or type(cause).__name__}"


@pytest.mark.parametrize("wrapped", [False, True], ids=["sdk-2.16", "sdk-2.17"])
def test_a_stream_silent_past_the_read_timeout_is_a_retryable_timeout(wrapped: bool) -> None:
    stall = httpx2.ReadTimeout("")
    cut = interruption(sdk_wrapped(stall) if wrapped else stall)
    assert cut is not None and cut.timed_out
    failure = classify(cut)
    assert failure is not None
    assert (failure.kind, failure.message) == ("timeout", "stream interrupted: ReadTimeout")


def test_a_cut_stream_quotes_no_error_that_could_quote_the_request() -> None:
    # h11 names the header value it refuses; the API key must not reach a log or the page.
    refused = h11.LocalProtocolError("Illegal header value b'sk-ant-secret '")
    cut = interruption(sdk_wrapped(httpx2.LocalProtocolError(str(refused))))
    assert cut is not None
    assert str(cut) == "stream interrupted: LocalProtocolError"


def test_a_connection_error_with_no_transport_cause_is_not_a_cut_stream() -> None:
    # The SDK's error without an HTTP failure under it (a request body it could not read).
    assert interruption(anthropic.APIConnectionError(request=REQUEST)) is None


@pytest.mark.parametrize("exc", [ValueError("bad tool args"), KeyError("x"), RuntimeError()])
def test_other_exceptions_are_not_provider_failures(exc: BaseException) -> None:
    assert classify(exc) is None


def over_aiohttp(cause: Exception, as_httpx: type[httpx2.TransportError]) -> Exception:
    """A failure mid-stream over the aiohttp transport: aiohttp's error, mapped by the
    transport to httpx's (`as_httpx`, with aiohttp's text), wrapped by the SDK."""
    mapped = as_httpx(str(cause))
    mapped.__cause__ = cause
    return sdk_wrapped(mapped)


def test_a_stream_cut_over_aiohttp_quotes_aiohttp() -> None:
    truncated = aiohttp.http_exceptions.TransferEncodingError("Not enough data")
    payload = aiohttp.ClientPayloadError(f"Response payload is not completed: {truncated!r}")
    payload.__cause__ = truncated
    for cause, as_httpx, said in [
        (payload, httpx2.ReadError, "Response payload is not completed: <TransferEncodingError"),
        # A disconnect is mapped to httpx's ConnectError, whose text is not quoted.
        (aiohttp.ServerDisconnectedError(), httpx2.ConnectError, "Server disconnected"),
    ]:
        cut = interruption(over_aiohttp(cause, as_httpx))
        assert cut is not None and not cut.timed_out
        failure = classify(cut)
        assert failure is not None
        assert (failure.kind, failure.retryable) == ("network", True)
        assert failure.message.startswith(f"stream interrupted: {said}"), failure.message


def test_a_stream_silent_past_the_read_timeout_over_aiohttp_is_a_timeout() -> None:
    stall = aiohttp.SocketTimeoutError("Timeout on reading data from socket")
    cut = interruption(over_aiohttp(stall, httpx2.ReadTimeout))
    assert cut is not None and cut.timed_out
    failure = classify(cut)
    assert failure is not None
    assert (failure.kind, failure.message) == (
        "timeout",
        "stream interrupted: Timeout on reading data from socket",
    )


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "ollama:qwen3"])
async def test_a_model_server_that_is_not_there_is_named_not_timed_out(model: str) -> None:
    """Nothing listens at the address (a local model server not started): the failure says
    so and names where it looked, on either SDK, instead of "timed out"."""
    import socket

    from duragent.activities.models.clients import ClientOptions, ModelClients
    from duragent.activities.models.seam import ModelFailed, ModelRequest
    from duragent.domain.config import TurnSnapshot

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    environ = {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "k", "OLLAMA_BASE_URL": url}
    clients = ModelClients(environ=environ, options=ClientOptions(read_timeout_s=5))
    snapshot = TurnSnapshot(
        model=model, thinking_level="off", system_prompt="", active_tools=None, max_tokens=10
    )
    try:
        with pytest.raises(ModelFailed) as failed:
            await clients.for_model(model).ask(ModelRequest(snapshot, [], [], "s", 0)).reply(print)
    finally:
        await clients.aclose()
    failure = failed.value.failure
    assert failure.kind == "network" and failure.retryable
    assert failure.message.startswith(f"cannot reach the model at {url}: connection refused")
