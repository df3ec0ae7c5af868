"""Accumulate the Messages API's streaming events into one assistant message."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from domain.events import DeltaKind
from domain.messages import (
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


@dataclass
class Delta:
    content_index: int
    kind: DeltaKind
    text: str
    tool_name: str | None = None


@dataclass
class _Block:
    kind: str
    text: str = ""
    signature: str | None = None
    tool_id: str = ""
    tool_name: str = ""
    complete: bool = False


@dataclass
class StreamAccumulator:
    """Feed raw stream events with `add`; read the message with `message()`."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str | None = None

    def add(self, event: Any) -> Delta | None:
        kind = event.type
        if kind == "message_start":
            self.model = event.message.model
            self._usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                self.blocks[event.index] = _Block("text", text=block.text or "")
            elif block.type == "thinking":
                self.blocks[event.index] = _Block("thinking", text=block.thinking or "")
            elif block.type == "redacted_thinking":
                self.blocks[event.index] = _Block("redacted", signature=block.data, complete=True)
            elif block.type == "tool_use":
                self.blocks[event.index] = _Block("tool", tool_id=block.id, tool_name=block.name)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            if event.index in self.blocks:
                self.blocks[event.index].complete = True
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._usage(event.usage)
        return None

    def _delta(self, index: int, delta: Any) -> Delta | None:
        block = self.blocks.get(index)
        if block is None:
            return None
        if delta.type == "text_delta":
            block.text += delta.text
            return Delta(index, "text", delta.text)
        if delta.type == "thinking_delta":
            block.text += delta.thinking
            return Delta(index, "thinking", delta.thinking)
        if delta.type == "signature_delta":
            block.signature = (block.signature or "") + delta.signature
        elif delta.type == "input_json_delta":
            block.text += delta.partial_json
            return Delta(index, "toolCall", delta.partial_json, tool_name=block.tool_name)
        return None

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        self.usage = Usage(
            input_tokens=getattr(usage, "input_tokens", None) or self.usage.input_tokens,
            output_tokens=getattr(usage, "output_tokens", None) or self.usage.output_tokens,
            cache_read_tokens=getattr(usage, "cache_read_input_tokens", None)
            or self.usage.cache_read_tokens,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None)
            or self.usage.cache_write_tokens,
        )

    def message(self, *, model: str, timestamp: int, partial: bool = False) -> AssistantMessage:
        """The message so far. A partial one (aborted) drops its tool calls: none of them
        will run, and a stored call without a result would break the transcript."""
        content: list[AssistantContent] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "text":
                content.append(TextContent(text=block.text))
            elif block.kind == "thinking":
                content.append(ThinkingContent(thinking=block.text, signature=block.signature))
            elif block.kind == "redacted":
                content.append(
                    ThinkingContent(thinking="", signature=block.signature, redacted=True)
                )
            elif block.kind == "tool" and not partial:
                content.append(
                    ToolCall(id=block.tool_id, name=block.tool_name, arguments=_args(block.text))
                )
        stop: StopReason = (
            "aborted" if partial else _STOP_REASONS.get(self.stop_reason or "", "stop")
        )
        return AssistantMessage(
            content=content,
            api="anthropic-messages",
            provider="anthropic",
            model=self.model or model,
            usage=self.usage,
            stop_reason=stop,
            timestamp=timestamp,
        )


def _args(raw: str) -> dict[str, Any]:
    """Tool arguments; malformed JSON is kept so the tool can report it to the model."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"__invalid_json__": raw}
    return value if isinstance(value, dict) else {"__invalid_json__": raw}
