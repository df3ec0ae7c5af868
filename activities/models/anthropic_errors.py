"""Provider failures, sorted into retryable (429, 529, 5xx, network) and not (400, 401, 403).

The API can overrule the status: an `x-should-retry: true` or `false` response header
says whether this failure is worth retrying, and is followed.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import anthropic

from duragent.activities.models.anthropic_stream import (
    IncompleteStream,
    InterruptedStream,
    UnreadableStream,
)
from duragent.domain.turns import ProviderErrorKind, ProviderFailure

_BY_STATUS: dict[int, tuple[ProviderErrorKind, bool]] = {
    400: ("bad_request", False),
    401: ("auth", False),
    403: ("permission", False),
    404: ("not_found", False),
    408: ("timeout", True),
    409: ("server", True),
    413: ("bad_request", False),
    429: ("rate_limit", True),
    529: ("overloaded", True),
}
_OVERFLOW_MARKERS = ("prompt is too long", "context window", "context_length")


def classify(exc: BaseException) -> ProviderFailure | None:
    """The provider failure behind an exception, or None if it is not one."""
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind, retryable = _BY_STATUS.get(
            status, ("server", True) if status >= 500 else ("other", False)
        )
        retryable = _should_retry(exc.response.headers, default=retryable)
        message = _message(exc)
        if kind == "bad_request" and any(m in message.lower() for m in _OVERFLOW_MARKERS):
            kind = "context_overflow"
        return ProviderFailure(
            kind=kind,
            status=status,
            message=f"{status} {message}",
            retryable=retryable,
            retry_after_ms=retry_after_ms(exc.response.headers) if retryable else None,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderFailure(
            kind="timeout", status=None, message="model request timed out", retryable=True
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderFailure(
            kind="network", status=None, message=f"network error: {exc}", retryable=True
        )
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


def _should_retry(headers: Any, *, default: bool) -> bool:
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


def _message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return f"{error.get('type', 'error')}: {error['message']}"
    return str(exc.message)
