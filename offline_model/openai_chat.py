"""OpenAI's Chat Completions wire: POST /v1/chat/completions, streamed and not.

Point an OpenAI client at the server with `base_url=server.openai_base_url` (the server's
URL + "/v1", where OpenAI's SDKs and the OpenAI-compatible clients expect the API). The
conversation key is the request's `user` (then `prompt_cache_key`, then `metadata.user_id`;
`offline_model.openai_wire`).

A reply step becomes one choice (index 0) of a `chat.completion`:

- `message.content`: the step's text parts joined (null when it has none);
- `message.reasoning_content`: its thinking parts joined, present only when it has some.
  OpenAI's own models do not return their reasoning here; DeepSeek, vLLM, SGLang and other
  OpenAI-compatible servers do, under this name, so a client can be tested against it.
  Signatures have no place on this wire and are dropped;
- `message.tool_calls`: one `{"id", "type": "function", "function": {"name", "arguments"}}`
  per tool_use part, `arguments` the input as a JSON string, `id` the scripted id or
  "call_" + 24 letters and digits;
- `finish_reason`: from the stop reason (`openai_wire.FINISH_REASONS`);
- `usage`: prompt_tokens (cached included), completion_tokens (reasoning included),
  total_tokens, `prompt_tokens_details.cached_tokens` / `cache_write_tokens` and
  `completion_tokens_details.reasoning_tokens` (`wire.counts`).

With `stream: true` the answer is `data: <chunk>` events ending in `data: [DONE]`, as the API
sends them: a first chunk with the role, then `reasoning_content` pieces, `content` pieces, and
per tool call a chunk with its index, id and name (arguments "") followed by chunks of argument
pieces, then a chunk with the `finish_reason`. With `stream_options.include_usage` every chunk
carries `"usage": null` and a last chunk with no choices carries the usage. Pieces are
`wire.CHUNK_CHARS` characters; `chunk_delay_ms` paces them and `cut_after_chunks` counts them
(a stream cut short of its pieces ends before the finish chunk).

Checked as the API checks them, with its wording (400, `invalid_request_error`): `model`,
`messages` (an array of at least one message of a known role with content; an assistant
message needs content or tool calls, whose `id` and `function.name` / `arguments` are
required), the pairing of tool calls and results (every `tool_calls` id answered by a `tool`
message among those right after it; a `tool` message only after an assistant message with
`tool_calls`, naming one of its ids), `tools` (`{"type": "function", "function": {"name"}}`,
names matching ^[a-zA-Z0-9_-]{1,64}$), `stream_options` only with `stream: true`, `metadata`
only with `store: true`, `max_tokens` / `max_completion_tokens` of at least 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from duragent.offline_model import openai_wire
from duragent.offline_model.openai_wire import invalid, missing, wrong_type
from duragent.offline_model.script import Step, TextPart, ThinkingPart, ToolUsePart
from duragent.offline_model.wire import (
    ApiError,
    Frame,
    JsonObject,
    counts,
    new_id,
    pieces,
    tool_arguments,
)

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class ChatCompletions(openai_wire.OpenAIWireProtocol):
    """POST /v1/chat/completions; see the module docstring."""

    def validate(self, body: JsonObject) -> ApiError | None:
        return validate_request(body)

    def build(self, step: Step, body: JsonObject) -> JsonObject:
        return build_completion(step, body)

    def frames(self, response: JsonObject, body: JsonObject) -> list[Frame]:
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        return list(stream_chunks(response, include_usage=include_usage))


# ---------------------------------------------------------------------------------------------
# Request validation


def validate_request(body: JsonObject) -> ApiError | None:
    """The 400 the real API would answer `body` with, or None; see the module docstring."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return invalid("you must provide a model parameter")
    problem = openai_wire.check_common(body, ("max_tokens", "max_completion_tokens"))
    if problem is not None:
        return problem
    if body.get("stream_options") is not None and body.get("stream") is not True:
        return invalid(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    if body.get("metadata") is not None and body.get("store") is not True:
        return invalid("The 'metadata' parameter is only allowed when 'store' is enabled.")
    problem = openai_wire.check_tools(body, _check_function_tool)
    if problem is not None:
        return problem
    return _check_messages(body)


def _check_function_tool(where: str, tool: JsonObject) -> ApiError | None:
    function = tool.get("function")
    if not isinstance(function, dict):
        return missing(f"{where}.function")
    return openai_wire.check_tool_name(function.get("name"), f"{where}.function.name")


def _check_messages(body: JsonObject) -> ApiError | None:
    if "messages" not in body:
        return missing("messages")
    messages = body["messages"]
    if not isinstance(messages, list):
        return wrong_type("messages", "an array of objects", messages)
    if not messages:
        return invalid(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            "messages",
            "empty_array",
        )
    for i, message in enumerate(messages):
        problem = _check_message(i, message)
        if problem is not None:
            return problem
    return _check_tool_pairing(messages)


def _check_message(i: int, message: object) -> ApiError | None:
    where = f"messages[{i}]"
    if not isinstance(message, dict):
        return wrong_type(where, "an object", message)
    role = message.get("role")
    if role is None:
        return missing(f"{where}.role")
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1])
        return invalid(
            f"Invalid value: '{role}'. Supported values are: {supported}, and '{ROLES[-1]}'.",
            f"{where}.role",
            "invalid_value",
        )
    content = message.get("content")
    if role == "assistant":
        calls = message.get("tool_calls")
        if content is None and not calls and message.get("function_call") is None:
            return missing(f"{where}.content")
        if calls is not None:
            return _check_tool_calls(where, calls)
    elif content is None:
        return missing(f"{where}.content")
    if content is not None and not isinstance(content, str | list):
        return wrong_type(f"{where}.content", "one of a string or array of objects", content)
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return missing(f"{where}.tool_call_id")
    return None


def _check_tool_calls(where: str, calls: object) -> ApiError | None:
    if not isinstance(calls, list):
        return wrong_type(f"{where}.tool_calls", "an array", calls)
    for j, call in enumerate(calls):
        at = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict):
            return wrong_type(at, "an object", call)
        if not isinstance(call.get("id"), str):
            return missing(f"{at}.id")
        function = call.get("function")
        if not isinstance(function, dict):
            return missing(f"{at}.function")
        for field in ("name", "arguments"):
            if not isinstance(function.get(field), str):
                return missing(f"{at}.function.{field}")
    return None


def _check_tool_pairing(messages: list[JsonObject]) -> ApiError | None:
    i = 0
    while i < len(messages):
        message = messages[i]
        if message["role"] == "tool":
            return invalid(
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",  # sic: the API's spelling
                f"messages.[{i}].role",
            )
        calls = message.get("tool_calls") if message["role"] == "assistant" else None
        i += 1
        if not calls:
            continue
        ids = [call["id"] for call in calls]
        answered: set[str] = set()
        while i < len(messages) and messages[i]["role"] == "tool":
            call_id = messages[i]["tool_call_id"]
            if call_id not in ids:
                return invalid(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message.",
                    f"messages.[{i}].tool_call_id",
                )
            answered.add(call_id)
            i += 1
        unanswered = [call_id for call_id in ids if call_id not in answered]
        if unanswered:
            return invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(unanswered)}",
                f"messages.[{i}].role",
            )
    return None


# ---------------------------------------------------------------------------------------------
# Responses


def build_completion(step: Step, body: JsonObject) -> JsonObject:
    """The `chat.completion` that `step` (a reply step) answers `body` with."""
    parts = step.reply or []
    texts = [part.text for part in parts if isinstance(part, TextPart)]
    thinking = [part.thinking for part in parts if isinstance(part, ThinkingPart)]
    calls = [
        {
            "id": part.tool_use.id or new_id("call_"),
            "type": "function",
            "function": {"name": part.tool_use.name, "arguments": tool_arguments(part)},
        }
        for part in parts
        if isinstance(part, ToolUsePart)
    ]
    message: JsonObject = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
        "annotations": [],
    }
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    stop_reason = step.stop_reason or ("tool_use" if step.has_tool_use else "end_turn")
    return {
        "id": new_id("chatcmpl-", 29),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": openai_wire.FINISH_REASONS[stop_reason],
            }
        ],
        "usage": _usage(step, body),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _usage(step: Step, body: JsonObject) -> JsonObject:
    used = counts(step, {k: body.get(k) for k in ("messages", "tools")})
    return {
        "prompt_tokens": used.prompt,
        "completion_tokens": used.output,
        "total_tokens": used.prompt + used.output,
        "prompt_tokens_details": {
            "cached_tokens": used.cache_read,
            "cache_write_tokens": used.cache_write,
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": used.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _data(payload: object) -> bytes:
    text = (
        payload
        if isinstance(payload, str)
        else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    )
    return f"data: {text}\n\n".encode()


def stream_chunks(completion: JsonObject, *, include_usage: bool) -> Iterator[Frame]:
    """The frames that stream `completion` (as `build_completion` made it); module docstring."""
    (choice,) = completion["choices"]
    message = choice["message"]
    head = {k: completion[k] for k in ("id", "object", "created", "model")}
    head = {
        **head,
        "object": "chat.completion.chunk",
        "service_tier": completion["service_tier"],
        "system_fingerprint": None,
    }

    def chunk(delta: JsonObject, finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        body: JsonObject = {**head, "choices": [choice]}
        if include_usage:
            body["usage"] = None
        return _data(body)

    # The API opens with content "" for a text reply and null for a reply of tool calls alone.
    opening_content = None if message["content"] is None else ""
    yield Frame(chunk({"role": "assistant", "content": opening_content, "refusal": None}), "event")
    for piece in pieces(message.get("reasoning_content") or ""):
        yield Frame(chunk({"reasoning_content": piece}), "delta")
    for piece in pieces(message["content"] or ""):
        yield Frame(chunk({"content": piece}), "delta")
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        start = {"name": function["name"], "arguments": ""}
        opening = {"index": index, "id": call["id"], "type": "function", "function": start}
        yield Frame(chunk({"tool_calls": [opening]}), "event")
        for piece in pieces(function["arguments"]):
            argument = {"index": index, "function": {"arguments": piece}}
            yield Frame(chunk({"tool_calls": [argument]}), "delta")
    yield Frame(chunk({}, choice["finish_reason"]), "end")
    if include_usage:
        yield Frame(_data({**head, "choices": [], "usage": completion["usage"]}), "event")
    yield Frame(_data("[DONE]"), "event")
