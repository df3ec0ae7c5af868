"""OpenAI's failures (Chat Completions and Responses, OpenAI's own API and the servers that
speak it), sorted as Anthropic's are (`anthropic_errors`): retryable (429, 5xx, network,
a broken stream) and not (400, 401, 403, 404, a context that does not fit).

The server's advice on retrying (`x-should-retry`, `retry-after-ms`, `retry-after`) is
followed. A message never carries the API key: an OpenAI 401 quotes the key it was given
(masked, but in part), so the key the request was sent with, and anything shaped like a
key, is blotted out.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from duragent.activities.models.transport_failures import (
    connection_failure,
    should_retry,
    status_failure,
    status_kind,
    stream_failure,
)
from duragent.domain.turns import ProviderErrorKind, ProviderFailure

OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI's code
    "maximum context length",  # OpenAI's and vLLM's words
    "context window",
    "context length",
    "prompt is too long",
    "too many tokens",
)
"""Words of a request refused because its context does not fit the model (the code or
the message of the error)."""

_KEY_SHAPED = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{6,}|\bAIza[A-Za-z0-9_\-]{20,}")


def classify(exc: BaseException) -> ProviderFailure | None:
    """The provider failure behind an exception of the openai SDK (or of a stream read
    through it), or None if it is not one."""
    if isinstance(exc, openai.APIStatusError):
        return _status_failure(exc)
    if isinstance(exc, openai.APIConnectionError):
        return connection_failure(exc, timed_out=isinstance(exc, openai.APITimeoutError))
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderFailure(
            kind="server",
            status=exc.status_code,
            message=f"the model's answer could not be read: {_redacted(exc.message, exc)}",
            retryable=True,
        )
    if isinstance(exc, openai.APIError):
        return _streamed_error(exc)
    return stream_failure(exc)


def _status_failure(exc: openai.APIStatusError) -> ProviderFailure:
    status = exc.status_code
    kind, retryable = status_kind(status)
    retryable = should_retry(exc.response.headers, default=retryable)
    code, message = _code_and_message(exc)
    if kind in ("bad_request", "other") and _overflows(code, message):
        kind, retryable = "context_overflow", False
    if kind == "not_found":
        model = _requested_model(exc)
        message = (
            f"unknown model {model!r}: {message}"
            if code == "model_not_found" or "model" in message.lower()
            else f"{message} (is the provider's base URL right, and the model {model!r}?)"
        )
    return status_failure(status, kind, message, retryable=retryable, headers=exc.response.headers)


def _streamed_error(exc: openai.APIError) -> ProviderFailure:
    """An error the server sent inside a stream that had begun (its status was 200): by its
    code and type; a server's error unless it says otherwise, and so retried."""
    code, message = _code_and_message(exc)
    said = f"{code or ''} {exc.type or ''}".lower()
    kind: ProviderErrorKind
    if _overflows(code, message):
        kind, retryable = "context_overflow", False
    elif "rate_limit" in said:
        kind, retryable = "rate_limit", True
    elif "invalid_request" in said:
        kind, retryable = "bad_request", False
    else:
        kind, retryable = "server", True
    return ProviderFailure(
        kind=kind, status=None, message=f"stream error: {message}", retryable=retryable
    )


def _overflows(code: str | None, message: str) -> bool:
    words = f"{code or ''} {message}".lower()
    return any(marker in words for marker in OVERFLOW_MARKERS)


def _code_and_message(exc: openai.APIError) -> tuple[str | None, str]:
    """The error's code and its words, "type: message" when the body is OpenAI's error
    object (the SDK unwraps `{"error": {...}}`), else the SDK's own message."""
    body: Any = exc.body
    if isinstance(body, list) and len(body) == 1:
        body = body[0]  # Gemini's OpenAI endpoint answers a list of one error
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]  # a server that nests it once more
    code = exc.code
    if isinstance(body, dict) and body.get("message"):
        kind = body.get("type") or "error"
        text = f"{kind}: {body['message']}"
        code = code or (str(body["code"]) if body.get("code") is not None else None)
    else:
        text = str(exc.message)
    return code, _redacted(text, exc)


def _requested_model(exc: openai.APIError) -> str:
    """The model the failed request named (the SDK keeps the request)."""
    try:
        sent = json.loads(exc.request.content or b"{}")
    except (ValueError, RuntimeError):  # a streamed body cannot be read back
        return "?"
    model = sent.get("model") if isinstance(sent, dict) else None
    return str(model) if model else "?"


def _redacted(text: str, exc: openai.APIError) -> str:
    """`text` without the request's API key, nor anything shaped like a key."""
    try:
        auth = exc.request.headers.get("authorization", "")
    except AttributeError:
        auth = ""
    key = auth.removeprefix("Bearer ").strip()
    if len(key) >= 4 and key != "none":
        text = text.replace(key, "[key]")
    return _KEY_SHAPED.sub("[key]", text)
