"""Our transcript and turn snapshot as Anthropic Messages API request parameters.

Built from the SDK's own parameter types (`MessageParam`, `TextBlockParam`, ...), so a
field the API does not know, or a wrong shape, fails the type check instead of a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypedDict, cast

from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    ImageBlockParam,
    MessageParam,
    MetadataParam,
    OutputConfigParam,
    TextBlockParam,
    ThinkingConfigParam,
    ToolParam,
    ToolResultBlockParam,
)

from duragent.domain.config import THINKING_BUDGETS, TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from duragent.domain.models import model_info, parse_model
from duragent.domain.resources import skills_section
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage

Role = Literal["user", "assistant"]
ImageType = Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
UserBlock = TextBlockParam | ImageBlockParam


class RequestParams(TypedDict, total=False):
    """The keyword arguments of `client.messages.create(...)` that a model turn sets."""

    model: str
    max_tokens: int
    messages: list[MessageParam]
    metadata: MetadataParam
    system: list[TextBlockParam]
    tools: list[ToolParam]
    thinking: ThinkingConfigParam
    output_config: OutputConfigParam


_CACHE: CacheControlEphemeralParam = {"type": "ephemeral"}
_THINKING_HEADROOM = 4096
_EFFORT: dict[str, Literal["low", "medium", "high"]] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
}


def request_params(
    snapshot: TurnSnapshot,
    transcript: Sequence[LlmMessage],
    tools: list[ToolSpec],
    *,
    session_id: str,
) -> RequestParams:
    """Keyword arguments for `client.messages.create(...)`; the model as its provider's API
    names it (`bedrock:anthropic.claude-...` asks Bedrock for `anthropic.claude-...`)."""
    params: RequestParams = {
        "model": parse_model(snapshot.model).model,
        "max_tokens": snapshot.max_tokens,
        "messages": api_messages(transcript),
        "metadata": {"user_id": session_id},
    }
    skills = [r for r in snapshot.resources if r.kind == "skill"]
    system = snapshot.system_prompt + skills_section(skills)
    if system:
        params["system"] = [{"type": "text", "text": system, "cache_control": _CACHE}]
    if tools:
        params["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
            for t in tools
        ]
    params.update(thinking_params(snapshot))
    return params


def thinking_params(snapshot: TurnSnapshot) -> RequestParams:
    """Thinking for the snapshot's level (the parameters it sets, to merge into the rest):
    a token budget on the older models that only know manual thinking (the registry's
    "budget" style, `domain.models`); adaptive thinking with an effort on the others, a
    model the registry does not know included (a new Claude, most likely)."""
    level = snapshot.thinking_level
    if level == "off":
        return {}
    if model_info(parse_model(snapshot.model)).thinking == "budget":
        budget = THINKING_BUDGETS[level]
        return {
            "thinking": {"type": "enabled", "budget_tokens": budget},
            "max_tokens": max(snapshot.max_tokens, budget + _THINKING_HEADROOM),
        }
    return {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": _EFFORT[level]},
    }


def api_messages(transcript: Sequence[LlmMessage]) -> list[MessageParam]:
    """Convert, drop what the API rejects (empty text, unsigned thinking), merge same roles.

    Consecutive user-side messages (tool results, then queued user text) become one user
    message with the tool results first, as the API requires.
    """
    turns: list[tuple[Role, list[ContentBlockParam]]] = []
    for message in transcript:
        role, blocks = _convert(message)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            merged = turns[-1][1] + blocks
            if role == "user":
                merged.sort(key=lambda b: b["type"] != "tool_result")
            turns[-1] = (role, merged)
        else:
            turns.append((role, blocks))
    if turns:
        _cache_breakpoint(turns[-1][1])
    return [_message(role, blocks) for role, blocks in turns]


def _message(role: Role, blocks: list[ContentBlockParam]) -> MessageParam:
    if role == "user":
        return {"role": "user", "content": blocks}
    return {"role": "assistant", "content": blocks}


def _cache_breakpoint(blocks: list[ContentBlockParam]) -> None:
    """Mark the last block: the prompt up to here is cached for the next turn."""
    last = blocks[-1]
    if last["type"] not in ("thinking", "redacted_thinking"):  # these take no cache_control
        blocks[-1] = cast(ContentBlockParam, {**last, "cache_control": _CACHE})


def _convert(message: LlmMessage) -> tuple[Role, list[ContentBlockParam]]:
    if isinstance(message, UserMessage):
        return "user", [_user_block(b) for b in message.content if _keep(b)]
    if isinstance(message, ToolResultMessage):
        content = [_user_block(b) for b in message.content if _keep(b)]
        result: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": content or [{"type": "text", "text": "(no output)"}],
        }
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    return "assistant", _assistant_blocks(message)


def _keep(block: TextContent | ImageContent) -> bool:
    return not (isinstance(block, TextContent) and not block.text.strip())


def _user_block(block: TextContent | ImageContent) -> UserBlock:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    # Images come from the read tool, which only reads the types the API takes.
    media_type = cast(ImageType, block.media_type)
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": block.data},
    }


def _assistant_blocks(message: AssistantMessage) -> list[ContentBlockParam]:
    blocks: list[ContentBlockParam] = []
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
