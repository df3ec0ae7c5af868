"""Our transcript and turn snapshot as Anthropic Messages API request parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.config import THINKING_BUDGETS, TurnSnapshot
from domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from domain.resources import skills_section
from domain.transcript import LlmMessage

Block = dict[str, Any]
ApiMessage = dict[str, Any]

_CACHE = {"type": "ephemeral"}
_THINKING_HEADROOM = 4096
_BUDGET_THINKING_MODELS = (
    "claude-3",
    "claude-sonnet-4-0",
    "claude-sonnet-4-2",
    "claude-sonnet-4-5",
    "claude-opus-4-0",
    "claude-opus-4-1",
    "claude-opus-4-2",
    "claude-opus-4-5",
    "claude-haiku-4-5",
)
_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


def request_params(
    snapshot: TurnSnapshot,
    transcript: Sequence[LlmMessage],
    tools: list[dict[str, Any]],
    *,
    session_id: str,
) -> dict[str, Any]:
    """Keyword arguments for `client.messages.create(..., stream=True)`."""
    params: dict[str, Any] = {
        "model": snapshot.model,
        "max_tokens": snapshot.max_tokens,
        "messages": api_messages(transcript),
        "metadata": {"user_id": session_id},
    }
    skills = [r for r in snapshot.resources if r.kind == "skill"]
    system = snapshot.system_prompt + skills_section(skills)
    if system:
        params["system"] = [{"type": "text", "text": system, "cache_control": _CACHE}]
    if tools:
        params["tools"] = tools
    params.update(thinking_params(snapshot))
    return params


def thinking_params(snapshot: TurnSnapshot) -> dict[str, Any]:
    """Thinking for the snapshot's level: adaptive thinking with an effort on current
    models; a token budget on the older ones that only know manual thinking."""
    level = snapshot.thinking_level
    if level == "off":
        return {}
    if snapshot.model.startswith(_BUDGET_THINKING_MODELS):
        budget = THINKING_BUDGETS[level]
        return {
            "thinking": {"type": "enabled", "budget_tokens": budget},
            "max_tokens": max(snapshot.max_tokens, budget + _THINKING_HEADROOM),
        }
    return {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": _EFFORT[level]},
    }


def api_messages(transcript: Sequence[LlmMessage]) -> list[ApiMessage]:
    """Convert, drop what the API rejects (empty text, unsigned thinking), merge same roles.

    Consecutive user-side messages (tool results, then queued user text) become one user
    message with the tool results first, as the API requires.
    """
    out: list[ApiMessage] = []
    for message in transcript:
        role, blocks = _convert(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            merged = out[-1]["content"] + blocks
            if role == "user":
                merged.sort(key=lambda b: b["type"] != "tool_result")
            out[-1]["content"] = merged
        else:
            out.append({"role": role, "content": blocks})
    if out:
        last = out[-1]["content"][-1]
        out[-1]["content"][-1] = {**last, "cache_control": _CACHE}
    return out


def _convert(message: LlmMessage) -> tuple[str, list[Block]]:
    if isinstance(message, UserMessage):
        return "user", [_user_block(b) for b in message.content if _keep(b)]
    if isinstance(message, ToolResultMessage):
        content = [_user_block(b) for b in message.content if _keep(b)]
        result: Block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        result["content"] = content or [{"type": "text", "text": "(no output)"}]
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    return "assistant", _assistant_blocks(message)


def _keep(block: TextContent | ImageContent) -> bool:
    return not (isinstance(block, TextContent) and not block.text.strip())


def _user_block(block: TextContent | ImageContent) -> Block:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.media_type, "data": block.data},
    }


def _assistant_blocks(message: AssistantMessage) -> list[Block]:
    blocks: list[Block] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            # The API only takes back thinking it signed; an unsigned block (a stream cut
            # short) is dropped rather than failing the next request.
            if block.redacted and block.signature:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            elif block.signature:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
    return blocks
