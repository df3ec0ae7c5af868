"""One model reply streamed as the API's raw events, built into our message as they arrive.

`client.messages.create(..., stream=True)` gives the raw events (message_start, then per
content block its start, deltas and stop, then message_delta and message_stop); each
block's pieces are kept in a small state of our own and joined once, when the message is
asked for. The SDK's accumulating helper (`client.messages.stream`) is not used: it
rebuilds its message snapshot on every event, which cost about a fifth of a worker's CPU
per reply. What else is ours: each delta goes to `on_delta` the moment it arrives (the run
events the page streams text from), a stream that ends without `message_stop` or whose
connection fails counts as cut off (`IncompleteStream`, `InterruptedStream`), and an
aborted reply keeps what had arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anthropic
from anthropic.types import RawMessageStreamEvent

from duragent.activities.models.anthropic_format import RequestParams
from duragent.activities.models.reply_stream import read_events, reply_message, tool_arguments
from duragent.activities.models.seam import Delta
from duragent.activities.models.transport_failures import IncompleteStream, UnreadableStream
from duragent.domain.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from duragent.domain.models import Api

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "error",
}

BlockKind = Literal["text", "thinking", "redacted", "tool", "other"]


class _Block:
    """One content block as far as it arrived: its pieces (text, thinking, or the tool
    input's JSON), joined only when the message is built."""

    __slots__ = ("arguments", "kind", "name", "parts", "signature", "tool_id")

    def __init__(self, kind: BlockKind, *, tool_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.signature = ""
        """A thinking block's signature; a redacted block's data."""
        self.tool_id = tool_id
        self.name = name
        self.arguments: dict[str, Any] | None = None
        """A tool call's input, parsed at its block's stop."""

    def parsed_arguments(self) -> dict[str, Any]:
        if self.arguments is None:
            self.arguments = tool_arguments("".join(self.parts))
        return self.arguments


class ReplyStream:
    """Stream one reply with `run`; `message` is it, whole or as far as it arrived."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._model: str | None = None
        self._stop_reason: str | None = None
        self._usage = Usage()
        self._finished = False

    async def run(
        self,
        client: anthropic.AsyncAnthropic,
        params: RequestParams,
        on_delta: Callable[[Delta], None],
    ) -> None:
        stream = await client.messages.create(**params, stream=True)
        async with stream:
            await read_events(stream, self.take, on_delta)
        if not self._finished:
            raise IncompleteStream("the model stream ended before message_stop")

    def take(self, event: RawMessageStreamEvent, on_delta: Callable[[Delta], None]) -> None:
        """Note one event (the last is `message_stop`). Deltas come first: they are nearly
        all of a stream's events."""
        if event.type == "content_block_delta":
            index = event.index
            block = self._blocks.get(index)
            if block is None:
                raise UnreadableStream(
                    f"the model stream could not be read: a delta for block {index}, not started"
                )
            delta = event.delta
            if delta.type == "text_delta":
                block.parts.append(delta.text)
                on_delta(Delta(index, "text", delta.text))
            elif delta.type == "input_json_delta":
                block.parts.append(delta.partial_json)
                on_delta(Delta(index, "toolCall", delta.partial_json, tool_name=block.name or None))
            elif delta.type == "thinking_delta":
                block.parts.append(delta.thinking)
                on_delta(Delta(index, "thinking", delta.thinking))
            elif delta.type == "signature_delta":
                block.signature = delta.signature
            # citations_delta: our text carries no citations
        elif event.type == "content_block_start":
            start = event.content_block
            block = _Block("other")
            if start.type == "text":
                block = _Block("text")
                if start.text:
                    block.parts.append(start.text)
            elif start.type == "thinking":
                block = _Block("thinking")
                if start.thinking:
                    block.parts.append(start.thinking)
                block.signature = start.signature or ""
            elif start.type == "redacted_thinking":
                block = _Block("redacted")
                block.signature = start.data
            elif start.type == "tool_use":
                block = _Block("tool", tool_id=start.id, name=start.name)
                if start.input:  # announced whole (the API starts with `{}` and streams it)
                    block.arguments = tool_arguments(start.input)
            self._blocks[event.index] = block
        elif event.type == "content_block_stop":
            block = self._blocks.get(event.index)
            if block is not None and block.kind == "tool" and block.parts:
                block.arguments = tool_arguments("".join(block.parts))
        elif event.type == "message_start":
            message = event.message
            self._model = message.model
            usage = message.usage
            self._usage = Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            )
        elif event.type == "message_delta":
            self._stop_reason = event.delta.stop_reason
            # Cumulative counts: each replaces the one before; a count not sent stays.
            final = event.usage
            before = self._usage
            self._usage = Usage(
                input_tokens=_count(final.input_tokens, before.input_tokens),
                output_tokens=final.output_tokens,
                cache_read_tokens=_count(final.cache_read_input_tokens, before.cache_read_tokens),
                cache_write_tokens=_count(
                    final.cache_creation_input_tokens, before.cache_write_tokens
                ),
            )
        elif event.type == "message_stop":
            self._finished = True

    def message(
        self,
        *,
        model: str,
        timestamp: int,
        partial: bool = False,
        provider: str = "anthropic",
        api: Api = "anthropic-messages",
    ) -> AssistantMessage:
        """The reply as our message (`model` if the stream named none), stamped with
        `provider` and the wire API `api` (the in-process offline model stands for any,
        reading as this client reads); a partial one as `reply_message` makes it."""
        content: list[AssistantContent] = []
        for block in self._blocks.values():
            if block.kind == "text":
                content.append(TextContent(text="".join(block.parts)))
            elif block.kind == "thinking":
                content.append(
                    ThinkingContent(
                        thinking="".join(block.parts), signature=block.signature or None
                    )
                )
            elif block.kind == "redacted":
                content.append(
                    ThinkingContent(thinking="", signature=block.signature, redacted=True)
                )
            elif block.kind == "tool":
                content.append(
                    ToolCall(id=block.tool_id, name=block.name, arguments=block.parsed_arguments())
                )
        return reply_message(
            content,
            partial=partial,
            stop=_STOP_REASONS.get(self._stop_reason or "", "stop"),
            api=api,
            provider=provider,
            model=self._model or model,
            usage=self._usage,
            timestamp=timestamp,
        )


def _count(sent: int | None, before: int) -> int:
    return before if sent is None else sent
