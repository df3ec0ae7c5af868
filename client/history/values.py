"""Values read out of history events: decoded payloads and failures, and the short texts
the summaries are made of."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import TimeoutType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.contrib.pydantic import pydantic_data_converter

from duragent.domain.turns import PROVIDER_ERROR

PREVIEW_CHARS = 100
"""Longest preview of a prompt, message, reply or tool output in a summary."""

MODEL_CALL_ID = re.compile(r"^turn-(\d+)-(?:model-)?(\d+)$")
"""A model call's activity id (`turn-T-model-A`), or a whole turn's (`turn-T-A`)."""


def event_time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def millis(delta: timedelta) -> int:
    return max(0, round(delta.total_seconds() * 1000))


def decode_one(payload: Payload) -> Any:
    try:
        return pydantic_data_converter.payload_converter.from_payload(payload)
    except Exception:  # an encoding this reader does not know (e.g. encrypted)
        encoding = payload.metadata.get("encoding", b"?").decode(errors="replace")
        return f"<{encoding} payload, {len(payload.data)} bytes>"


def decode(payloads: Payloads) -> Any:
    """The first payload's value (activities and workflows here take one argument)."""
    return decode_one(payloads.payloads[0]) if payloads.payloads else None


def failure_of(failure: Failure) -> dict[str, Any]:
    out: dict[str, Any] = {"message": failure.message}
    if failure.HasField("application_failure_info"):
        info = failure.application_failure_info
        out["type"] = info.type
        if info.details.payloads:
            out["details"] = [decode_one(p) for p in info.details.payloads]
    elif failure.HasField("timeout_failure_info"):
        timeout = TimeoutType.Name(failure.timeout_failure_info.timeout_type)
        out["type"] = "timeout " + timeout.removeprefix("TIMEOUT_TYPE_").lower()
    elif failure.HasField("canceled_failure_info"):
        out["type"] = "cancelled"
    if failure.HasField("cause"):
        out["cause"] = failure_of(failure.cause)
    return out


def provider_of(failure: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ProviderFailure a model call's failure carries, if any."""
    if failure and failure.get("type") == PROVIDER_ERROR and failure.get("details"):
        first = failure["details"][0]
        return first if isinstance(first, dict) else None
    return None


def provider_kind(provider: dict[str, Any] | None) -> str:
    if provider is None:
        return "not a provider error"
    status = f" {provider['status']}" if provider.get("status") else ""
    return f"{provider.get('kind')}{status}"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def first_user_text(prompt: Any) -> str:
    for message in prompt if isinstance(prompt, list) else []:
        if isinstance(message, dict) and message.get("role") == "user":
            return preview(text_of(message.get("content")))
    return ""


def scheduled_by(messages: Any) -> str | None:
    """The schedule that sent these messages (a run's prompt, a queued message), if one
    did: its id, from the message's `scheduled` mark."""
    for message in messages if isinstance(messages, list) else [messages]:
        mark = message.get("scheduled") if isinstance(message, dict) else None
        if isinstance(mark, dict) and mark.get("schedule_id"):
            return str(mark["schedule_id"])
    return None


def token_counts(usage: dict[str, Any]) -> str:
    return f"{usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens"


def compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def preview(text: Any, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line, cut to `limit` characters."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def short_run_id(run_id: str) -> str:
    return run_id[:8]


def duration_text(ms: int | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes}m{seconds:02d}s"
