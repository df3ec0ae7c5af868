"""One model reply streamed with the SDK's stream helper, and converted to our message.

`client.messages.stream(...)` accumulates the reply itself (text, thinking and its
signature, tool input JSON, usage, stop reason). What it does not do is ours: each delta
goes to `on_delta` the moment it arrives (the run events the page streams text from), a
stream that ends without `message_stop` or whose connection fails counts as cut off
(`InterruptedStream`, the same whichever shape the SDK version gives the failure), and an
aborted reply keeps what had arrived.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.types import (
    Message,
    RawContentBlockDeltaEvent,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

from duragent.activities.models.anthropic_format import RequestParams
from duragent.activities.models.seam import Delta
from duragent.activities.models.transport_failures import (
    IncompleteStream,
    UnreadableStream,
    interruption,
)
from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "error",
}


class ReplyStream:
    """Stream one reply with `run`; `so_far` is the message as far as it arrived."""

    def __init__(self) -> None:
        self.so_far: Message | None = None

    async def run(
        self,
        client: anthropic.AsyncAnthropic,
        params: RequestParams,
        on_delta: Callable[[Delta], None],
    ) -> Message:
        finished = False
        async with client.messages.stream(**params) as stream:
            try:
                async for event in stream:
                    if event.type == "message_start":
                        # The SDK accumulates into this one object from here on.
                        self.so_far = stream.current_message_snapshot
                    elif event.type == "content_block_delta":
                        delta = _delta(event, stream.current_message_snapshot)
                        if delta is not None:
                            on_delta(delta)
                    elif event.type == "message_stop":
                        finished = True
            except ValueError as exc:  # the SDK's accumulator (or its SSE decoder) gave up
                raise UnreadableStream(f"the model stream could not be read: {exc}") from exc
            except Exception as exc:
                cut = interruption(exc)
                if cut is None:
                    raise
                raise cut from exc
            if not finished:
                raise IncompleteStream("the model stream ended before message_stop")
            return await stream.get_final_message()


def _delta(event: RawContentBlockDeltaEvent, so_far: Message) -> Delta | None:
    delta = event.delta
    if delta.type == "text_delta":
        return Delta(event.index, "text", delta.text)
    if delta.type == "thinking_delta":
        return Delta(event.index, "thinking", delta.thinking)
    if delta.type == "input_json_delta":
        block = so_far.content[event.index]
        name = block.name if isinstance(block, ToolUseBlock) else None
        return Delta(event.index, "toolCall", delta.partial_json, tool_name=name)
    return None  # signatures and citations: part of the final message only


def assistant_message(
    reply: Message | None,
    *,
    model: str,
    timestamp: int,
    partial: bool = False,
    provider: str = "anthropic",
) -> AssistantMessage:
    """Our message for the SDK's. A partial one (aborted) drops its tool calls: none of
    them will run, and a stored call without a result would break the transcript."""
    content: list[AssistantContent] = []
    for block in reply.content if reply else []:
        if isinstance(block, TextBlock):
            content.append(TextContent(text=block.text))
        elif isinstance(block, ThinkingBlock):
            content.append(
                ThinkingContent(thinking=block.thinking, signature=block.signature or None)
            )
        elif isinstance(block, RedactedThinkingBlock):
            content.append(ThinkingContent(thinking="", signature=block.data, redacted=True))
        elif isinstance(block, ToolUseBlock) and not partial:
            content.append(
                ToolCall(id=block.id, name=block.name, arguments=_arguments(block.input))
            )
    stop: StopReason = "aborted" if partial else _STOP_REASONS.get(_stop_reason(reply), "stop")
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider=provider,
        model=reply.model if reply else model,
        usage=_usage(reply),
        stop_reason=stop,
        timestamp=timestamp,
    )


def _stop_reason(reply: Message | None) -> str:
    return (reply.stop_reason if reply else None) or ""


def _usage(reply: Message | None) -> Usage:
    if reply is None:
        return Usage()
    usage = reply.usage
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )


def _arguments(value: Any) -> dict[str, Any]:
    """Tool arguments; input that is not an object is kept so the tool can report it."""
    if isinstance(value, dict):
        return value
    return {"__invalid_json__": json.dumps(value, ensure_ascii=False)}
