"""Our transcript and turn snapshot as OpenAI Responses API request parameters.

Built from the SDK's own parameter types (`ResponseInputItemParam`, `FunctionToolParam`,
...), so a field the API does not know, or a wrong shape, fails the type check instead of
a request. Nothing is stored at OpenAI (`store: false`): every request sends the whole
context, and the reasoning of the model's earlier replies travels back in it as the
encrypted content the API handed out (`reasoning_signature`), as Anthropic's thinking
signatures do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal, TypedDict, cast

from openai.types.responses import (
    EasyInputMessageParam,
    FunctionToolParam,
    ResponseFunctionToolCallParam,
    ResponseIncludable,
    ResponseInputContentParam,
    ResponseInputImageParam,
    ResponseInputItemParam,
    ResponseInputTextParam,
    ResponseReasoningItemParam,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput
from openai.types.responses.response_reasoning_item_param import Summary
from openai.types.shared_params import Reasoning

from duragent.activities.models.openai_format import TOOL_IMAGES, effort, result_text, user_id
from duragent.domain.config import TurnSnapshot
from duragent.domain.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from duragent.domain.models import ModelRef, model_info
from duragent.domain.resources import skills_section
from duragent.domain.tools import ToolSpec
from duragent.domain.transcript import LlmMessage

API = "openai-responses"


class Identity(TypedDict):
    """Who asks (`identity`)."""

    prompt_cache_key: str
    safety_identifier: str


class RequestParams(Identity, total=False):
    """The request body's fields that a model turn sets: the parameters of
    `client.responses.create(...)`, already the API's JSON, so the body is posted as it is."""

    model: str
    input: list[ResponseInputItemParam]
    instructions: str
    tools: list[FunctionToolParam]
    max_output_tokens: int
    store: bool
    include: list[ResponseIncludable]
    reasoning: Reasoning


def request_params(
    ref: ModelRef,
    provider: str,
    snapshot: TurnSnapshot,
    transcript: Sequence[LlmMessage],
    tools: list[ToolSpec],
    *,
    session_id: str,
) -> RequestParams:
    """The request body (`RequestParams`), without `stream`."""
    who = identity(session_id)
    params: RequestParams = {
        "model": ref.model,
        "input": input_items(transcript, ref=ref, provider=provider),
        "max_output_tokens": snapshot.max_tokens,
        "store": False,
        "prompt_cache_key": who["prompt_cache_key"],
        "safety_identifier": who["safety_identifier"],
    }
    skills = [r for r in snapshot.resources if r.kind == "skill"]
    instructions = snapshot.system_prompt + skills_section(skills)
    if instructions:
        params["instructions"] = instructions
    if tools:
        params["tools"] = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["input_schema"],
                # Strict mode wants every property required and no extra ones: our tools'
                # schemas (and MCP servers') are not written for it.
                "strict": False,
            }
            for t in tools
        ]
    if model_info(ref).thinking == "effort":
        # The API hands a reasoning model's reasoning out only encrypted, and only when
        # asked; without it nothing of the reasoning could travel back (store is false).
        # Other models refuse the include.
        params["include"] = ["reasoning.encrypted_content"]
        if snapshot.thinking_level != "off":
            params["reasoning"] = {"effort": effort(ref, snapshot), "summary": "auto"}
    return params


def identity(session_id: str) -> Identity:
    """Who asks: the session, as the cache key (its turns share their prompt's beginning,
    which OpenAI routes by this key to a warm cache) and as the identifier OpenAI's abuse
    checks read. Both take at most 64 characters: a longer id goes as its SHA-256
    (`openai_format.user_id`)."""
    who = user_id(session_id)
    return {"prompt_cache_key": who, "safety_identifier": who}


def input_items(
    transcript: Sequence[LlmMessage], *, ref: ModelRef, provider: str
) -> list[ResponseInputItemParam]:
    """The transcript as input items, in order. A tool result's images go in a user
    message after the results of its turn (a function call's output here is text)."""
    items: list[ResponseInputItemParam] = []
    images: list[ResponseInputImageParam] = []
    for message in transcript:
        if images and not isinstance(message, ToolResultMessage):
            items.append(_tool_images(images))
            images = []
        if isinstance(message, UserMessage):
            parts: list[ResponseInputContentParam] = [
                _user_part(b) for b in message.content if _keep(b)
            ]
            if parts:
                user: EasyInputMessageParam = {"type": "message", "role": "user", "content": parts}
                items.append(user)
        elif isinstance(message, ToolResultMessage):
            output: FunctionCallOutput = {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": result_text(message),
            }
            items.append(output)
            images += [_image(b) for b in message.content if isinstance(b, ImageContent)]
        else:
            items += _assistant_items(message, ref=ref, provider=provider)
    if images:
        items.append(_tool_images(images))
    return items


def _keep(block: TextContent | ImageContent) -> bool:
    return not (isinstance(block, TextContent) and not block.text.strip())


def _user_part(block: TextContent | ImageContent) -> ResponseInputContentParam:
    if isinstance(block, TextContent):
        return {"type": "input_text", "text": block.text}
    return _image(block)


def _image(block: ImageContent) -> ResponseInputImageParam:
    url = f"data:{block.media_type};base64,{block.data}"
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _tool_images(images: list[ResponseInputImageParam]) -> EasyInputMessageParam:
    intro: ResponseInputTextParam = {"type": "input_text", "text": TOOL_IMAGES}
    return {"type": "message", "role": "user", "content": [intro, *images]}


class _AssistantText(TypedDict):
    """The model's own earlier text. The SDK types it as a stored output item (with its
    `id` and `status`); the API takes it without them, as OpenAI's own agent sends it."""

    type: Literal["message"]
    role: Literal["assistant"]
    content: list[dict[str, str]]


def _assistant_items(
    message: AssistantMessage, *, ref: ModelRef, provider: str
) -> list[ResponseInputItemParam]:
    mine = (message.api, message.provider, message.model) == (API, provider, ref.model)
    items: list[ResponseInputItemParam] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                text: _AssistantText = {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text}],
                }
                items.append(cast(ResponseInputItemParam, text))
        elif isinstance(block, ThinkingContent):
            # Only this model's own reasoning goes back, and only with its encrypted
            # content (nothing is stored at OpenAI to refer to by id).
            reasoning = reasoning_item(block) if mine else None
            if reasoning is not None:
                items.append(reasoning)
        elif isinstance(block, ToolCall):
            call: ResponseFunctionToolCallParam = {
                "type": "function_call",
                "call_id": block.id,
                "name": block.name,
                "arguments": json.dumps(block.arguments, ensure_ascii=False),
            }
            items.append(call)
    return items


def reasoning_signature(item_id: str, encrypted_content: str | None) -> str:
    """What a reasoning item's `ThinkingContent.signature` holds: what the API needs to be
    handed the item back."""
    return json.dumps(
        {"type": "reasoning", "id": item_id, "encrypted_content": encrypted_content},
        separators=(",", ":"),
    )


def reasoning_item(block: ThinkingContent) -> ResponseReasoningItemParam | None:
    """The reasoning input item `block` came from, or None when its signature is not a
    reasoning item's (another API's thinking) or carries no encrypted content."""
    try:
        signed = json.loads(block.signature or "")
    except ValueError:
        return None
    if not isinstance(signed, dict) or signed.get("type") != "reasoning":
        return None
    item_id, encrypted = signed.get("id"), signed.get("encrypted_content")
    if not isinstance(item_id, str) or not isinstance(encrypted, str):
        return None
    summary: list[Summary] = (
        [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
    )
    return {"type": "reasoning", "id": item_id, "encrypted_content": encrypted, "summary": summary}
