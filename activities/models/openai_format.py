"""Our transcript and turn snapshot as Chat Completions request parameters (OpenAI's API,
and every OpenAI-compatible server: Ollama, vLLM, llama.cpp, OpenRouter, Gemini's).

Built from the SDK's own parameter types (`ChatCompletionMessageParam`, ...), so a field
the API does not know, or a wrong shape, fails the type check instead of a request. Kept
to what every such server takes: the system prompt as a "system" message (OpenAI's
reasoning models read it as their developer message), a user message's text as a plain
string unless it has images, `user` for who asks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Literal, TypedDict

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartImageParam,
    ChatCompletionContentPartParam,
    ChatCompletionContentPartTextParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.shared import ReasoningEffort

from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from duragent.domain.models import ModelRef, model_info
from duragent.domain.resources import skills_section
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage


class RequestParams(TypedDict, total=False):
    """The request body's fields that a turn sets (`stream` and `stream_options` are the
    caller's): the parameters of `client.chat.completions.create(...)`, already the API's
    JSON, so the body is posted as it is."""

    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionFunctionToolParam]
    max_completion_tokens: int
    reasoning_effort: ReasoningEffort
    user: str


Effort = Literal["minimal", "low", "medium", "high"]
"""The reasoning efforts a thinking level asks for (OpenAI's Chat Completions and
Responses take the same)."""

_EFFORT: dict[str, Effort] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
}
_NO_MINIMAL = re.compile(r"o\d")
"""The o-series take low, medium and high only (GPT-5 also takes minimal)."""
_MAX_USER = 64
TOOL_IMAGES = "Images from the tool results:"


def request_params(
    ref: ModelRef,
    snapshot: TurnSnapshot,
    transcript: Sequence[LlmMessage],
    tools: list[ToolSpec],
    *,
    session_id: str,
) -> RequestParams:
    """The request body (`RequestParams`): the model as its provider names it
    (`ollama:qwen3:8b` asks Ollama for `qwen3:8b`)."""
    skills = [r for r in snapshot.resources if r.kind == "skill"]
    system = snapshot.system_prompt + skills_section(skills)
    messages: list[ChatCompletionMessageParam] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages += chat_messages(transcript)
    params: RequestParams = {
        "model": ref.model,
        "messages": messages,
        "max_completion_tokens": snapshot.max_tokens,
        "user": user_id(session_id),
    }
    if tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            }
            for t in tools
        ]
    effort = reasoning_effort(ref, snapshot)
    if effort is not None:
        params["reasoning_effort"] = effort
    return params


def user_id(session_id: str) -> str:
    """Who asks, as OpenAI's abuse checks (and the offline model's conversations) read
    it: the session, or its SHA-256 when longer than the 64 characters OpenAI takes."""
    if len(session_id) > _MAX_USER:
        return hashlib.sha256(session_id.encode()).hexdigest()
    return session_id


def reasoning_effort(ref: ModelRef, snapshot: TurnSnapshot) -> ReasoningEffort | None:
    """The effort for a reasoning model (the registry's "effort" style, `domain.models`);
    None, so the parameter is left out, for every other model (which refuse it) and at
    level "off": the reasoning models cannot all stop reasoning ("none" is refused by
    the o-series and the first GPT-5s), so they reason at their default."""
    if snapshot.thinking_level == "off" or model_info(ref).thinking != "effort":
        return None
    return effort(ref, snapshot)


def effort(ref: ModelRef, snapshot: TurnSnapshot) -> Effort:
    """The effort of the snapshot's thinking level (one that is not "off") for the model
    `ref`: "minimal" is "low" for the o-series, which do not take it."""
    level = _EFFORT[snapshot.thinking_level]
    if level == "minimal" and _NO_MINIMAL.match(ref.model):
        return "low"
    return level


def chat_messages(transcript: Sequence[LlmMessage]) -> list[ChatCompletionMessageParam]:
    """The transcript as chat messages, in order. A tool message takes text only: the
    images of a turn's tool results follow its results in one user message (the results
    must come right after the call that asked for them). Thinking is not sent back: the
    API has no place for it. An assistant message left with neither text nor tool calls
    (its reply was all thinking, or aborted before any text) is left out."""
    messages: list[ChatCompletionMessageParam] = []
    images: list[ChatCompletionContentPartImageParam] = []
    for message in transcript:
        if images and not isinstance(message, ToolResultMessage):
            messages.append(_tool_images(images))
            images = []
        if isinstance(message, UserMessage):
            user = _user_message(message.content)
            if user is not None:
                messages.append(user)
        elif isinstance(message, ToolResultMessage):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "content": result_text(message),
                }
            )
            images += [_image(b) for b in message.content if isinstance(b, ImageContent)]
        else:
            assistant = _assistant_message(message)
            if assistant is not None:
                messages.append(assistant)
    if images:
        messages.append(_tool_images(images))
    return messages


def _user_message(
    content: Sequence[TextContent | ImageContent],
) -> ChatCompletionUserMessageParam | None:
    kept = [b for b in content if not (isinstance(b, TextContent) and not b.text.strip())]
    if not kept:
        return None
    if all(isinstance(b, TextContent) for b in kept):
        # A plain string: what every OpenAI-compatible server takes.
        return {"role": "user", "content": "\n".join(_texts(kept))}
    parts: list[ChatCompletionContentPartParam] = [
        _text_part(b.text) if isinstance(b, TextContent) else _image(b) for b in kept
    ]
    return {"role": "user", "content": parts}


def _texts(blocks: Sequence[TextContent | ImageContent]) -> list[str]:
    return [b.text for b in blocks if isinstance(b, TextContent)]


def _text_part(text: str) -> ChatCompletionContentPartTextParam:
    return {"type": "text", "text": text}


def _image(block: ImageContent) -> ChatCompletionContentPartImageParam:
    url = f"data:{block.media_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def result_text(message: ToolResultMessage) -> str:
    """A tool result's text as both OpenAI APIs are sent it: its text blocks, or what
    stands for none (its images go apart)."""
    text = "\n".join(_texts(message.content))
    if text.strip():
        return text
    if any(isinstance(b, ImageContent) for b in message.content):
        return "(see the attached image)"
    return "(no output)"


def _tool_images(
    images: list[ChatCompletionContentPartImageParam],
) -> ChatCompletionUserMessageParam:
    return {"role": "user", "content": [_text_part(TOOL_IMAGES), *images]}


def _assistant_message(message: AssistantMessage) -> ChatCompletionAssistantMessageParam | None:
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    calls = [_tool_call(b) for b in message.content if isinstance(b, ToolCall)]
    if not text.strip() and not calls:
        return None
    assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    assistant["content"] = text if text.strip() else None
    if calls:
        assistant["tool_calls"] = calls
    return assistant


def _tool_call(call: ToolCall) -> ChatCompletionMessageFunctionToolCallParam:
    # Arguments that did not parse are kept as {"__invalid_json__": raw}: sent back as that
    # object (valid JSON), which shows the model what it wrote, where the raw text could
    # make a strict server refuse the request.
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
