"""Provider failures, sorted into retryable (429, 529, 5xx, network) and not (400, 401, 403).

The API can overrule the status: an `x-should-retry: true` or `false` response header
says whether this failure is worth retrying, and is followed.
"""

from __future__ import annotations

import anthropic

from duragent.activities.models.transport_failures import (
    connection_failure,
    should_retry,
    status_failure,
    status_kind,
    stream_failure,
)
from duragent.domain.turns import ProviderFailure

_OVERFLOW_MARKERS = ("prompt is too long", "context window", "context_length")


def classify(exc: BaseException) -> ProviderFailure | None:
    """The provider failure behind an exception, or None if it is not one."""
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind, retryable = status_kind(status)
        retryable = should_retry(exc.response.headers, default=retryable)
        message = _message(exc)
        if kind == "bad_request" and any(m in message.lower() for m in _OVERFLOW_MARKERS):
            kind = "context_overflow"
        return status_failure(
            status, kind, message, retryable=retryable, headers=exc.response.headers
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return connection_failure(exc, timed_out=isinstance(exc, anthropic.APITimeoutError))
    return stream_failure(exc)


def _message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return f"{error.get('type', 'error')}: {error['message']}"
    return str(exc.message)
