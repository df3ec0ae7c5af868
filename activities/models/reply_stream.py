"""What every reply stream does alike, whatever its wire: reading the stream's events with
its failures sorted (an event the SDK could not read, a connection that failed under the
stream), reading a tool call's argument JSON, and making the reply our message, whole or
as far as it arrived.

Each wire's stream (`anthropic_stream`, `openai_chat`, `openai_responses`) keeps its own
events' meaning: these are only the parts that are the same for all of them (and for the
models a test plays, `testing.FunctionModel` and the offline model's `ScriptedModel`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Callable, Iterable
from typing import Any, TypeVar

from duragent.activities.models.seam import Delta
from duragent.activities.models.transport_failures import UnreadableStream, interruption
from duragent.domain.messages import AssistantContent, AssistantMessage, StopReason, ToolCall, Usage

Event = TypeVar("Event")


async def read_events(
    stream: AsyncIterable[Event],
    take: Callable[[Event, Callable[[Delta], None]], None],
    on_delta: Callable[[Delta], None],
) -> None:
    """Give each of the stream's events to `take` (with `on_delta`, for the pieces it
    tells) until the stream ends. An event the SDK's decoder could not read raises
    `UnreadableStream`, a failure of the connection under the stream `InterruptedStream`;
    anything else raised goes through as it is. Whether the reply was finished is the
    caller's to say: each wire ends it with its own event."""
    try:
        async for event in stream:
            take(event, on_delta)
    except ValueError as exc:  # the SDK's decoder could not read an event
        raise UnreadableStream(f"the model stream could not be read: {exc}") from exc
    except Exception as exc:
        cut = interruption(exc)
        if cut is None:
            raise
        raise cut from exc


def tool_arguments(value: object) -> dict[str, Any]:
    """A tool call's arguments from their JSON (or an object given whole). Arguments that
    are not a JSON object are kept as they came, under `__invalid_json__`, so the tool can
    report them; none at all (empty or blank) are no arguments."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return {"__invalid_json__": json.dumps(value, ensure_ascii=False)}
    if not value.strip():
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {"__invalid_json__": value}
    return parsed if isinstance(parsed, dict) else {"__invalid_json__": value}


def reply_message(
    content: Iterable[AssistantContent],
    *,
    partial: bool,
    stop: StopReason,
    api: str,
    provider: str,
    model: str,
    usage: Usage,
    timestamp: int,
) -> AssistantMessage:
    """The reply as our message, stopped for `stop`. A partial one (`so_far`: the reply
    aborted) stops as "aborted" and drops its tool calls: none of them will run, and a
    stored call without a result would break the transcript."""
    if partial:
        content = [block for block in content if not isinstance(block, ToolCall)]
    return AssistantMessage(
        content=list(content),
        api=api,
        provider=provider,
        model=model,
        usage=usage,
        stop_reason="aborted" if partial else stop,
        timestamp=timestamp,
    )
