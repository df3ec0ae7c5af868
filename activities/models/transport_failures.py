"""What any provider's HTTP says about a failure, whatever its SDK: the server's advice on
retrying (`x-should-retry`, `retry-after-ms`, `retry-after`) and a streamed reply whose
connection failed under it. Each wire's error module (`anthropic_errors`,
`openai_errors`) sorts its SDK's exceptions with these.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

from duragent.domain.turns import ProviderErrorKind, ProviderFailure


class IncompleteStream(Exception):
    """The stream ended before the reply said it was finished: the connection was closed
    mid-reply."""


class UnreadableStream(Exception):
    """The SDK could not read what the stream sent (e.g. tool input that is not JSON)."""


class InterruptedStream(Exception):
    """The connection failed while the reply streamed: cut, reset, or silent past the read
    timeout (`timed_out`)."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def interruption(exc: BaseException) -> InterruptedStream | None:
    """The stream's failure if the connection under it failed, else None. Versions and
    transports differ in shape: up to Anthropic's SDK 2.16 the HTTP library's error comes
    through as is, from 2.17 (and in OpenAI's SDK) it is the cause of the SDK's
    `APIConnectionError` (or `APITimeoutError`), and over aiohttp that is in turn caused by
    aiohttp's own."""
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None:
        if type(cause).__module__.startswith(_TRANSPORT_MODULES) or isinstance(
            cause, ConnectionError
        ):
            chain.append(cause)
        cause = cause.__cause__
    if not chain:
        return None
    # Only what the other side did is quoted, the deepest account of it: the text of other
    # errors (h11's on a header it refuses) can quote the request, and with it the API key.
    told = [e for e in chain if type(e).__name__ in _QUOTED_ERRORS or isinstance(e, OSError)]
    reason = (str(told[-1]) if told else "") or type(chain[-1]).__name__
    timed_out = any("Timeout" in type(e).__name__ for e in chain)
    return InterruptedStream(f"stream interrupted: {reason}", timed_out=timed_out)


_TRANSPORT_MODULES = ("httpx", "httpcore", "h11", "aiohttp")
_QUOTED_ERRORS = frozenset(
    {
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "CloseError",
        "ServerDisconnectedError",
        "ClientPayloadError",
    }
)


_BY_STATUS: dict[int, tuple[ProviderErrorKind, bool]] = {
    400: ("bad_request", False),
    401: ("auth", False),
    403: ("permission", False),
    404: ("not_found", False),
    408: ("timeout", True),
    409: ("server", True),
    413: ("bad_request", False),
    429: ("rate_limit", True),
    529: ("overloaded", True),  # Anthropic's
}


def status_kind(status: int) -> tuple[ProviderErrorKind, bool]:
    """What an HTTP error status means, and whether a retry may pass (before the server's
    own advice, `should_retry`)."""
    return _BY_STATUS.get(status, ("server", True) if status >= 500 else ("other", False))


def status_failure(
    status: int, kind: ProviderErrorKind, message: str, *, retryable: bool, headers: Any
) -> ProviderFailure:
    """The failure of an error answer with HTTP `status` (sorted by the wire's error module
    into `kind`, `retryable`), told as the status and `message`; a retry waits as the
    answer's `headers` advise."""
    return ProviderFailure(
        kind=kind,
        status=status,
        message=f"{status} {message}",
        retryable=retryable,
        retry_after_ms=retry_after_ms(headers) if retryable else None,
    )


def stream_failure(exc: BaseException) -> ProviderFailure | None:
    """The provider failure of a stream that broke (`IncompleteStream`, `UnreadableStream`,
    `InterruptedStream`; all retryable), or None for any other exception."""
    if isinstance(exc, IncompleteStream):
        return ProviderFailure(kind="network", status=None, message=str(exc), retryable=True)
    if isinstance(exc, UnreadableStream):
        return ProviderFailure(kind="server", status=None, message=str(exc), retryable=True)
    if isinstance(exc, InterruptedStream):
        return ProviderFailure(
            kind="timeout" if exc.timed_out else "network",
            status=None,
            message=str(exc),
            retryable=True,
        )
    return None


def should_retry(headers: Any, *, default: bool) -> bool:
    """The API's own word on retrying (`x-should-retry`), else what the status says."""
    advice = str(headers.get("x-should-retry", "")).strip().lower()
    if advice == "true":
        return True
    if advice == "false":
        return False
    return default


def retry_after_ms(headers: Any) -> int | None:
    """The server's requested wait: `retry-after-ms`, or `retry-after` in seconds or as a date."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0, int(float(raw_ms)))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0, int(float(raw) * 1000))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(raw)
        return max(0, int((parsed.timestamp() - time.time()) * 1000)) if parsed else None


def connection_failure(exc: BaseException, *, timed_out: bool) -> ProviderFailure:
    """An SDK's connection error (`timed_out`: its timeout subclass): a server that is not
    there named as such, else a timeout or a network failure; all retryable."""
    if refused := unreachable(exc):
        return refused
    if timed_out:
        return ProviderFailure(
            kind="timeout", status=None, message="model request timed out", retryable=True
        )
    return ProviderFailure(
        kind="network", status=None, message=f"network error: {exc}", retryable=True
    )


def unreachable(exc: BaseException) -> ProviderFailure | None:
    """The failure of a request that never reached the server (nothing listens there: a
    local model server not started, a wrong base URL), told as such. The SDKs report it
    as a connection error or, over aiohttp, as a connect timeout; the cause says which."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ in _REFUSED:
            request = getattr(exc, "request", None)
            url = getattr(request, "url", None)
            where = f"{url.scheme}://{url.host}:{url.port}" if url is not None else "the server"
            return ProviderFailure(
                kind="network",
                status=None,
                message=f"cannot reach the model at {where}: connection refused "
                "(is its server running, and its base URL right?)",
                retryable=True,
            )
        cause = cause.__cause__ or cause.__context__
    return None


_REFUSED = frozenset({"ClientConnectorError", "ConnectError"})
