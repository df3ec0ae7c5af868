"""The Anthropic Messages API wire format: request checks, messages, SSE events and error bodies.

Everything here is a pure function of its arguments (apart from random ids), so the server
only decides *when* to send what these functions build; `AnthropicMessages` is this module as
the app's `WireProtocol` (the OpenAI wires are `openai_chat` and `openai_responses`).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from typing import TypeGuard

from duragent.offline_model.script import DEFAULT_KEY, Step, TextPart, ThinkingPart, ToolUsePart
from duragent.offline_model.wire import (
    CHUNK_CHARS,
    EXHAUSTED_TEXT,
    ApiError,
    Frame,
    FrameKind,
    JsonObject,
    WireProtocol,
    estimate_tokens,
    new_id,
    pieces,
)

__all__ = [  # CHUNK_CHARS and the helpers moved to wire.py stay importable from here
    "CHUNK_CHARS",
    "EXHAUSTED_TEXT",
    "AnthropicMessages",
    "JsonObject",
    "SseEvent",
    "build_message",
    "conversation_key",
    "encode_sse",
    "error_body",
    "estimate_tokens",
    "exhausted_message",
    "new_id",
    "stream_events",
    "validate_request",
]

SseEvent = tuple[str, JsonObject]
"""One server-sent event: its `event:` name and its `data:` JSON object."""


def conversation_key(body: JsonObject) -> str:
    """The script key of a request: its `metadata.user_id`, or "default" when it has none."""
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        user_id = metadata.get("user_id")
        if isinstance(user_id, str) and user_id:
            return user_id
    return DEFAULT_KEY


def error_body(error_type: str, message: str, request_id: str) -> JsonObject:
    """The API's error JSON: {"type": "error", "error": {...}, "request_id": ...}."""
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }


# ---------------------------------------------------------------------------------------------
# Request validation


def validate_request(body: JsonObject, *, count_tokens: bool = False) -> str | None:
    """The message of the 400 invalid_request_error the real API would give `body`, or None.

    Checks the required fields, role order, non-empty content, tool definitions, the thinking
    budget and the pairing of `tool_use` / `tool_result` blocks, with the API's wording.
    `count_tokens` skips the `max_tokens` checks (the token counting endpoint has none).
    """
    checks = [_check_model, _check_options, _check_tools, _check_messages]
    if not count_tokens:
        checks.insert(1, _check_max_tokens)
    for check in checks:
        problem = check(body)
        if problem is not None:
            return problem
    return None


def _check_model(body: JsonObject) -> str | None:
    if "model" not in body:
        return "model: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a valid string"
    return None


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_max_tokens(body: JsonObject) -> str | None:
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    max_tokens = body["max_tokens"]
    if not _is_int(max_tokens):
        return "max_tokens: Input should be a valid integer"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not _is_int(budget):
            return "thinking.enabled.budget_tokens: Field required"
        if budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if max_tokens <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    return None


def _check_options(body: JsonObject) -> str | None:
    if "stream" in body and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: Input should be a valid list"
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            return "metadata: Input should be a valid dictionary"
        user_id = metadata.get("user_id")
        if user_id is not None and not isinstance(user_id, str):
            return "metadata.user_id: Input should be a valid string"
    return None


def _check_tools(body: JsonObject) -> str | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: set[str] = set()
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{k}: Input should be a valid dictionary"
        name = tool.get("name")
        if not isinstance(name, str):
            return f"tools.{k}.custom.name: Field required"
        # Server tools (web search, bash, ...) carry a versioned `type`; only custom tools
        # need a schema.
        if tool.get("type", "custom") == "custom" and not isinstance(
            tool.get("input_schema"), dict
        ):
            return f"tools.{k}.custom.input_schema: Field required"
        if name in names:
            return "tools: Tool names must be unique."
        names.add(name)
    return None


def _blocks(content: object) -> list[JsonObject]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_messages(body: JsonObject) -> str | None:
    if "messages" not in body:
        return "messages: Field required"
    messages = body["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        problem = _check_message_shape(i, message, last=i == len(messages) - 1)
        if problem is not None:
            return problem
    if messages[0]["role"] != "user":
        return 'messages: first message must use the "user" role'
    for i in range(1, len(messages)):
        role = messages[i]["role"]
        if role == messages[i - 1]["role"]:
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
    return _check_tool_pairing(messages)


def _check_message_shape(i: int, message: object, *, last: bool) -> str | None:
    if not isinstance(message, dict):
        return f"messages.{i}: Input should be a valid dictionary"
    role = message.get("role")
    if role not in ("user", "assistant"):
        return f"messages.{i}.role: Input should be 'user' or 'assistant'"
    if "content" not in message:
        return f"messages.{i}.content: Field required"
    content = message["content"]
    if not isinstance(content, str | list):
        return f"messages.{i}.content: Input should be a valid list"
    # The optional final assistant message is a prefill, which may be empty.
    prefill = last and role == "assistant"
    if isinstance(content, str):
        return None if prefill else _check_text(content)
    if not content and not prefill:
        return (
            f"messages.{i}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
    for j, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"messages.{i}.content.{j}.type: Field required"
        problem = _check_block(i, j, role, block)
        if problem is not None:
            return problem
    return None


def _check_text(text: object) -> str | None:
    if not isinstance(text, str) or not text:
        return "messages: text content blocks must be non-empty"
    if not text.strip():
        return "messages: text content blocks must contain non-whitespace text"
    return None


def _check_block(i: int, j: int, role: str, block: JsonObject) -> str | None:
    kind = block["type"]
    where = f"messages.{i}.content.{j}"
    if kind == "text":
        return _check_text(block.get("text"))
    if kind == "tool_use":
        if role != "assistant":
            return f"{where}: `tool_use` blocks can only be in `assistant` messages"
        for field in ("id", "name"):
            if not isinstance(block.get(field), str):
                return f"{where}.tool_use.{field}: Field required"
    if kind == "tool_result":
        if role != "user":
            return f"{where}: `tool_result` blocks can only be in `user` messages"
        if not isinstance(block.get("tool_use_id"), str):
            return f"{where}.tool_result.tool_use_id: Field required"
    return None


def _check_tool_pairing(messages: list[JsonObject]) -> str | None:
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _blocks(message["content"])
        if message["role"] == "assistant":
            for j, block in enumerate(blocks):
                if block["type"] == "tool_use":
                    if block["id"] in seen_ids:
                        return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                    seen_ids.add(block["id"])
            missing = _unanswered_tool_uses(blocks, messages[i + 1 : i + 2])
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
        else:
            previous = _blocks(messages[i - 1]["content"]) if i > 0 else []
            offered = {b["id"] for b in previous if b["type"] == "tool_use"}
            for j, block in enumerate(blocks):
                if block["type"] == "tool_result" and block["tool_use_id"] not in offered:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block['tool_use_id']}. Each `tool_result` block "
                        "must have a corresponding `tool_use` block in the previous message."
                    )
    return None


def _unanswered_tool_uses(blocks: list[JsonObject], following: list[JsonObject]) -> list[str]:
    """Ids of tool_use `blocks` not answered by the leading tool_result run of `following`."""
    answered: set[str] = set()
    for message in following:
        # Only the tool_result blocks that open the next message count: the API wants the
        # results first, so one placed after text is as good as missing.
        for block in _blocks(message["content"]):
            if block["type"] != "tool_result":
                break
            answered.add(block["tool_use_id"])
    return [b["id"] for b in blocks if b["type"] == "tool_use" and b["id"] not in answered]


# ---------------------------------------------------------------------------------------------
# Responses


def build_message(step: Step, request: JsonObject) -> JsonObject:
    """The complete assistant message JSON that `step` (a reply step) answers `request` with.

    Tool ids and thinking signatures missing from the script are generated here, so call it
    once per request and derive the stream from its result with `stream_events`.
    """
    content: list[JsonObject] = []
    for part in step.reply or []:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolUsePart):
            spec = part.tool_use
            content.append(
                {
                    "type": "tool_use",
                    "id": spec.id or new_id("toolu_"),
                    "name": spec.name,
                    "input": spec.input,
                }
            )
        elif isinstance(part, ThinkingPart):
            content.append(
                {
                    "type": "thinking",
                    "thinking": part.thinking,
                    "signature": part.signature or _new_signature(),
                }
            )
    stop_reason = step.stop_reason or ("tool_use" if step.has_tool_use else "end_turn")
    stop_sequence = None
    if stop_reason == "stop_sequence":
        stop_sequence = step.stop_sequence or _first_stop_sequence(request)
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": _usage(step, request, content),
    }


def exhausted_message(request: JsonObject) -> JsonObject:
    """The message sent to a key whose steps ran out under `when_exhausted: reply`."""
    return build_message(Step.model_validate({"reply": [{"text": EXHAUSTED_TEXT}]}), request)


def _new_signature() -> str:
    return base64.b64encode(secrets.token_bytes(96)).decode("ascii")


def _first_stop_sequence(request: JsonObject) -> str | None:
    sequences = request.get("stop_sequences")
    if isinstance(sequences, list) and sequences and isinstance(sequences[0], str):
        return sequences[0]
    return None


def _usage(step: Step, request: JsonObject, content: list[JsonObject]) -> JsonObject:
    scripted = step.usage
    prompt = {k: request.get(k) for k in ("system", "messages", "tools")}
    input_tokens = scripted.input_tokens if scripted else None
    output_tokens = scripted.output_tokens if scripted else None
    return {
        "input_tokens": estimate_tokens(prompt) if input_tokens is None else input_tokens,
        "cache_creation_input_tokens": scripted.cache_creation_input_tokens if scripted else 0,
        "cache_read_input_tokens": scripted.cache_read_input_tokens if scripted else 0,
        "output_tokens": estimate_tokens(content) if output_tokens is None else output_tokens,
        "service_tier": "standard",
    }


def _block_start(block: JsonObject) -> JsonObject:
    """A block as content_block_start announces it: empty text/thinking, `{}` input."""
    if block["type"] == "text":
        return {"type": "text", "text": ""}
    if block["type"] == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {**block, "input": {}}


def _block_deltas(block: JsonObject) -> Iterator[JsonObject]:
    if block["type"] == "text":
        for piece in pieces(block["text"]):
            yield {"type": "text_delta", "text": piece}
    elif block["type"] == "thinking":
        for piece in pieces(block["thinking"]):
            yield {"type": "thinking_delta", "thinking": piece}
        yield {"type": "signature_delta", "signature": block["signature"]}
    elif block["type"] == "tool_use":
        for piece in pieces(json.dumps(block["input"], ensure_ascii=False)):
            yield {"type": "input_json_delta", "partial_json": piece}


def stream_events(message: JsonObject) -> list[SseEvent]:
    """The SSE events that stream `message` (as built by `build_message`), in API order.

    message_start (empty content, stop_reason null), ping, then per block
    content_block_start / content_block_delta... / content_block_stop, then message_delta
    (stop_reason, stop_sequence, final usage) and message_stop.
    """
    usage = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        # The API reports a token or so of output up front and the real count at the end.
        "usage": {**usage, "output_tokens": min(1, usage["output_tokens"])},
    }
    events: list[SseEvent] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": _block_start(block),
                },
            )
        )
        for delta in _block_deltas(block):
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    final_usage = {k: usage[k] for k in usage if k != "service_tier"}
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": message["stop_reason"],
                    "stop_sequence": message["stop_sequence"],
                },
                "usage": final_usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_sse(event: SseEvent) -> bytes:
    """One event in SSE framing: `event: NAME`, `data: JSON`, blank line."""
    name, data = event
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


class AnthropicMessages(WireProtocol):
    """POST /v1/messages: the functions above as the app's `WireProtocol`."""

    request_id_header = "request-id"
    parse_error = "There was an error parsing the body"

    def conversation_key(self, body: JsonObject) -> str:
        return conversation_key(body)

    def validate(self, body: JsonObject, *, count_tokens: bool = False) -> ApiError | None:
        problem = validate_request(body, count_tokens=count_tokens)
        return None if problem is None else ApiError(400, "invalid_request_error", problem)

    def build(self, step: Step, body: JsonObject) -> JsonObject:
        return build_message(step, body)

    def frames(self, response: JsonObject, body: JsonObject) -> list[Frame]:
        kinds: dict[str, FrameKind] = {"content_block_delta": "delta", "message_stop": "end"}
        return [Frame(encode_sse(e), kinds.get(e[0], "event")) for e in stream_events(response)]

    def error(self, error: ApiError, request_id: str) -> tuple[int, JsonObject]:
        return error.status, error_body(error.type, error.message, request_id)
