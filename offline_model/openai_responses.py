"""OpenAI's Responses wire: POST /v1/responses, streamed and not, and its token count.

Point an OpenAI client at the server with `base_url=server.openai_base_url` (the server's
URL + "/v1"). The conversation key is the request's `user` (then `prompt_cache_key`, then
`metadata.user_id`; `offline_model.openai_wire`). The server keeps no responses: send the
whole input each time (`store: false` style); `previous_response_id` is echoed, never read.

A reply step becomes a `response` whose `output` holds one item per part, in the step's order:

- thinking: a `reasoning` item, the thinking text as its one `summary_text` (what OpenAI's
  models show of their reasoning); the signature (scripted or generated) is its
  `encrypted_content` when the request's `include` lists "reasoning.encrypted_content", as
  the API sends it only then;
- text: a `message` item (role assistant) with one `output_text` part;
- tool_use: a `function_call` item: `call_id` the scripted id or "call_" + 24 letters and
  digits, `arguments` the input as a JSON string, `id` "fc_" + hex.

`status` is "completed", or "incomplete" with `incomplete_details.reason` "max_output_tokens"
(stop reasons max_tokens, model_context_window_exceeded) or "content_filter" (refusal).
`usage`: input_tokens (cached included), `input_tokens_details.cached_tokens` /
`cache_write_tokens`, output_tokens (reasoning included),
`output_tokens_details.reasoning_tokens`, total_tokens (`wire.counts`).

With `stream: true` the answer is the API's typed events (`event:` name and `data:` JSON, each
with its `sequence_number`): response.created, response.in_progress, then per item
response.output_item.added, its content's events (reasoning:
response.reasoning_summary_part.added, response.reasoning_summary_text.delta...,
.done, response.reasoning_summary_part.done; message: response.content_part.added,
response.output_text.delta..., .done, response.content_part.done; function call:
response.function_call_arguments.delta..., .done) and response.output_item.done, then
response.completed (or response.incomplete). The `.delta` events carry `wire.CHUNK_CHARS`
characters each; `chunk_delay_ms` paces them and `cut_after_chunks` counts them (a stream cut
short of its deltas ends before response.completed).

Checked as the API checks them, with its wording (400, `invalid_request_error`): `model`,
`input` (a string or an array of items: messages of a known role with content,
`function_call` with `call_id`, `name`, `arguments`, `function_call_output` with `call_id`
and `output`), the pairing of calls and outputs (every `function_call` answered by a
`function_call_output` with its `call_id`, and every output following its call, unless the
input builds on `previous_response_id` or item references, which this server cannot see),
`tools` (function tools are flat: `{"type": "function", "name", "parameters"}`, names matching
^[a-zA-Z0-9_-]{1,64}$), `max_output_tokens` of at least 16.

POST /v1/responses/input_tokens answers `{"object": "response.input_tokens", "input_tokens"}`
with the same estimate a response reports; it consumes no step.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator

from duragent.offline_model import openai_wire
from duragent.offline_model.openai_wire import invalid, missing, wrong_type
from duragent.offline_model.script import Step, TextPart, ThinkingPart, ToolUsePart
from duragent.offline_model.wire import (
    ApiError,
    Frame,
    FrameKind,
    JsonObject,
    counts,
    estimate_tokens,
    hex_id,
    new_id,
    pieces,
    tool_arguments,
)

ROLES = ("user", "assistant", "system", "developer")

_INCOMPLETE = {
    "max_tokens": "max_output_tokens",
    "model_context_window_exceeded": "max_output_tokens",
    "refusal": "content_filter",
}


class Responses(openai_wire.OpenAIWireProtocol):
    """POST /v1/responses; see the module docstring."""

    def validate(self, body: JsonObject) -> ApiError | None:
        return validate_request(body)

    def build(self, step: Step, body: JsonObject) -> JsonObject:
        return build_response(step, body)

    def frames(self, response: JsonObject, body: JsonObject) -> list[Frame]:
        return list(stream_events(response))


def _prompt(body: JsonObject) -> JsonObject:
    return {k: body.get(k) for k in ("instructions", "input", "tools")}


def count_input_tokens(body: JsonObject) -> JsonObject:
    """The answer of POST /v1/responses/input_tokens: the estimate a response would report."""
    return {"object": "response.input_tokens", "input_tokens": estimate_tokens(_prompt(body))}


# ---------------------------------------------------------------------------------------------
# Request validation


def validate_request(body: JsonObject) -> ApiError | None:
    """The 400 the real API would answer `body` with, or None; see the module docstring."""
    model = body.get("model")
    if model is None:
        return missing("model")
    if not isinstance(model, str):
        return wrong_type("model", "a string", model)
    problem = openai_wire.check_common(body, ("max_output_tokens",))
    if problem is not None:
        return problem
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str | list):
        return wrong_type("instructions", "a string", instructions)
    problem = openai_wire.check_tools(body, _check_function_tool)
    if problem is not None:
        return problem
    return _check_input(body)


def _check_function_tool(where: str, tool: JsonObject) -> ApiError | None:
    # A Chat Completions tool (`{"type": "function", "function": {...}}`) fails here.
    return openai_wire.check_tool_name(tool.get("name"), f"{where}.name")


def _check_input(body: JsonObject) -> ApiError | None:
    items = body.get("input")
    if items is None or isinstance(items, str):
        return None
    if not isinstance(items, list):
        return wrong_type("input", "one of a string or array of input items", items)
    for i, item in enumerate(items):
        problem = _check_item(i, item)
        if problem is not None:
            return problem
    return _check_pairing(items, sees_all=body.get("previous_response_id") is None)


def _item_type(item: JsonObject) -> object:
    return item.get("type", "message" if "role" in item else None)


def _check_item(i: int, item: object) -> ApiError | None:
    where = f"input[{i}]"
    if not isinstance(item, dict):
        return wrong_type(where, "an object", item)
    kind = _item_type(item)
    if kind is None:
        return missing(f"{where}.role")
    required: tuple[str, ...] = ()
    if kind == "message":
        role = item.get("role")
        if role not in ROLES:
            if role is None:
                return missing(f"{where}.role")
            supported = ", ".join(f"'{r}'" for r in ROLES[:-1])
            return invalid(
                f"Invalid value: '{role}'. Supported values are: {supported}, and '{ROLES[-1]}'.",
                f"{where}.role",
                "invalid_value",
            )
        if "content" not in item:
            return missing(f"{where}.content")
        if not isinstance(item["content"], str | list):
            content = item["content"]
            return wrong_type(f"{where}.content", "one of a string or array of objects", content)
    elif kind == "function_call":
        required = ("call_id", "name", "arguments")
    elif kind == "function_call_output":
        if "output" not in item:  # an empty string is an output; a missing one is not
            return missing(f"{where}.output")
        required = ("call_id",)
    for field in required:
        if not isinstance(item.get(field), str):
            return missing(f"{where}.{field}")
    return None


def _check_pairing(items: list[JsonObject], *, sees_all: bool) -> ApiError | None:
    # Item references and a previous response bring in calls this server never sees.
    sees_all = sees_all and not any(_item_type(item) == "item_reference" for item in items)
    called: set[str] = set()
    answered: set[str] = set()
    for item in items:
        kind = _item_type(item)
        if kind == "function_call":
            called.add(item["call_id"])
        elif kind == "function_call_output":
            if sees_all and item["call_id"] not in called:
                return invalid(
                    f"No tool call found for function call output with call_id {item['call_id']}.",
                    "input",
                )
            answered.add(item["call_id"])
    for item in items:
        if _item_type(item) == "function_call" and item["call_id"] not in answered:
            return invalid(f"No tool output found for function call {item['call_id']}.", "input")
    return None


# ---------------------------------------------------------------------------------------------
# Responses


def build_response(step: Step, body: JsonObject) -> JsonObject:
    """The `response` that `step` (a reply step) answers `body` with."""
    include = body.get("include")
    with_encrypted = isinstance(include, list) and "reasoning.encrypted_content" in include
    output: list[JsonObject] = []
    for part in step.reply or []:
        if isinstance(part, ThinkingPart):
            reasoning: JsonObject = {
                "id": hex_id("rs_"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": part.thinking}],
            }
            if with_encrypted:
                reasoning["encrypted_content"] = part.signature or new_id("", 128)
            output.append(reasoning)
        elif isinstance(part, TextPart):
            text = {"type": "output_text", "text": part.text, "annotations": [], "logprobs": []}
            output.append(
                {
                    "id": hex_id("msg_"),
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        elif isinstance(part, ToolUsePart):
            output.append(
                {
                    "id": hex_id("fc_"),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": tool_arguments(part),
                    "call_id": part.tool_use.id or new_id("call_"),
                    "name": part.tool_use.name,
                }
            )
    stop_reason = step.stop_reason or ("tool_use" if step.has_tool_use else "end_turn")
    incomplete = _INCOMPLETE.get(stop_reason)
    if incomplete is not None and output and "status" in output[-1]:
        output[-1]["status"] = "incomplete"  # the item the limit cut short
    return {
        "id": hex_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed" if incomplete is None else "incomplete",
        "background": False,
        "error": None,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body["model"],
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": _usage(step, body),
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _usage(step: Step, body: JsonObject) -> JsonObject:
    used = counts(step, _prompt(body))
    return {
        "input_tokens": used.prompt,
        "input_tokens_details": {
            "cached_tokens": used.cache_read,
            "cache_write_tokens": used.cache_write,
        },
        "output_tokens": used.output,
        "output_tokens_details": {"reasoning_tokens": used.reasoning},
        "total_tokens": used.prompt + used.output,
    }


class _Events:
    """Builds the stream's frames, numbering them as the API does (`sequence_number`)."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def __call__(self, name: str, data: JsonObject, kind: FrameKind = "event") -> Frame:
        payload = {"type": name, "sequence_number": next(self._numbers), **data}
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return Frame(f"event: {name}\ndata: {text}\n\n".encode(), kind)


def stream_events(response: JsonObject) -> Iterator[Frame]:
    """The frames that stream `response` (as `build_response` made it); module docstring."""
    event = _Events()
    opening = {**response, "status": "in_progress", "incomplete_details": None}
    opening = {**opening, "output": [], "usage": None}
    yield event("response.created", {"response": opening})
    yield event("response.in_progress", {"response": opening})
    for index, item in enumerate(response["output"]):
        at: JsonObject = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            yield from _reasoning_events(event, index, at, item)
        elif item["type"] == "message":
            yield from _message_events(event, index, at, item)
        else:
            yield from _function_call_events(event, index, at, item)
        yield event("response.output_item.done", {"output_index": index, "item": item})
    closing = "response.completed" if response["status"] == "completed" else "response.incomplete"
    yield event(closing, {"response": response}, "end")


def _reasoning_events(
    event: _Events, index: int, at: JsonObject, item: JsonObject
) -> Iterator[Frame]:
    yield event(
        "response.output_item.added", {"output_index": index, "item": {**item, "summary": []}}
    )
    for number, summary in enumerate(item["summary"]):
        part = {**at, "summary_index": number}
        blank = {"type": "summary_text", "text": ""}
        yield event("response.reasoning_summary_part.added", {**part, "part": blank})
        for piece in pieces(summary["text"]):
            yield event("response.reasoning_summary_text.delta", {**part, "delta": piece}, "delta")
        yield event("response.reasoning_summary_text.done", {**part, "text": summary["text"]})
        yield event("response.reasoning_summary_part.done", {**part, "part": summary})


def _message_events(
    event: _Events, index: int, at: JsonObject, item: JsonObject
) -> Iterator[Frame]:
    opening = {**item, "status": "in_progress", "content": []}
    yield event("response.output_item.added", {"output_index": index, "item": opening})
    for number, content in enumerate(item["content"]):
        part = {**at, "content_index": number}
        yield event("response.content_part.added", {**part, "part": {**content, "text": ""}})
        for piece in pieces(content["text"]):
            delta = {**part, "delta": piece, "logprobs": []}
            yield event("response.output_text.delta", delta, "delta")
        done = {**part, "text": content["text"], "logprobs": []}
        yield event("response.output_text.done", done)
        yield event("response.content_part.done", {**part, "part": content})


def _function_call_events(
    event: _Events, index: int, at: JsonObject, item: JsonObject
) -> Iterator[Frame]:
    opening = {**item, "status": "in_progress", "arguments": ""}
    yield event("response.output_item.added", {"output_index": index, "item": opening})
    for piece in pieces(item["arguments"]):
        yield event("response.function_call_arguments.delta", {**at, "delta": piece}, "delta")
    done = {**at, "name": item["name"], "arguments": item["arguments"]}
    yield event("response.function_call_arguments.done", done)
