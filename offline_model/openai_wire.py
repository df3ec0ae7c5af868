"""What OpenAI's two wires share: the conversation key, the error body and the request checks
both APIs make alike (the tools' among them), and the `WireProtocol` part that answers the
same on both (`OpenAIWireProtocol`).

The conversation key (the script key a request plays) is the first non-empty string of:

1. `user`: both APIs take it and the official SDKs send it as given (`user=session_id`);
   every OpenAI-compatible server accepts it. OpenAI calls it deprecated in favour of
   `safety_identifier` and `prompt_cache_key`, hence:
2. `prompt_cache_key`: what a harness that caches per session sends its session id in;
3. `metadata.user_id`: the Anthropic API's key, where a client reuses its metadata (Chat
   Completions takes `metadata` only with `store: true`, and refuses it otherwise);

else "default". `safety_identifier` is not read: it names an end user, not a conversation.

Errors: OpenAI's body is `{"error": {"message", "type", "param", "code"}}` and the request id
travels in `x-request-id`. A script's error status is kept, except Anthropic's 529 overloaded,
which OpenAI never sends: it becomes the 503 OpenAI answers when overloaded. The error type
becomes OpenAI's (`OPENAI_TYPES`); a type the table does not know (a script may name
OpenAI's own, e.g. `insufficient_quota`) is sent as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from duragent.offline_model.script import DEFAULT_KEY
from duragent.offline_model.wire import ApiError, JsonObject, WireProtocol

OPENAI_TYPES: Final[dict[str, tuple[str, str | None]]] = {
    # Anthropic error type -> OpenAI (type, code)
    "invalid_request_error": ("invalid_request_error", None),
    "authentication_error": ("invalid_request_error", "invalid_api_key"),
    "billing_error": ("insufficient_quota", "insufficient_quota"),
    "permission_error": ("invalid_request_error", None),
    "not_found_error": ("invalid_request_error", None),
    "request_too_large": ("invalid_request_error", None),
    "rate_limit_error": ("requests", "rate_limit_exceeded"),
    "api_error": ("server_error", None),
    "timeout_error": ("server_error", None),
    "overloaded_error": ("server_error", None),
}
"""How an error type of the script (Anthropic's) reads on OpenAI's wire, with its code."""

PARSE_ERROR = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON.)"
)

REQUEST_ID_HEADER = "x-request-id"

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class OpenAIWireProtocol(WireProtocol):
    """What OpenAI's wires (`openai_chat`, `openai_responses`) answer alike: the request id
    header, the unparsable body's 400, the conversation key and the errors' shape."""

    request_id_header = REQUEST_ID_HEADER
    parse_error = PARSE_ERROR

    def conversation_key(self, body: JsonObject) -> str:
        return conversation_key(body)

    def error(self, error: ApiError, request_id: str) -> tuple[int, JsonObject]:
        return error_answer(error)


def conversation_key(body: JsonObject) -> str:
    """The script key of an OpenAI request; see the module docstring for the order."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    for candidate in (body.get("user"), body.get("prompt_cache_key"), user_id):
        if isinstance(candidate, str) and candidate:
            return candidate
    return DEFAULT_KEY


def error_answer(error: ApiError) -> tuple[int, JsonObject]:
    """The status and body of `error` on OpenAI's wire (see the module docstring)."""
    openai_type, code = OPENAI_TYPES.get(error.type, (error.type, None))
    status = 503 if error.status == 529 else error.status
    body = {
        "message": error.message,
        "type": openai_type,
        "param": error.param,
        "code": error.code if error.code is not None else code,
    }
    return status, {"error": body}


def invalid(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400 invalid_request_error, worded and tagged as OpenAI's."""
    return ApiError(400, "invalid_request_error", message, param, code)


def missing(param: str) -> ApiError:
    return invalid(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def wrong_type(param: str, expected: str, value: object) -> ApiError:
    return invalid(
        f"Invalid type for '{param}': expected {expected}, but got {json_type(value)} instead.",
        param,
        "invalid_type",
    )


def json_type(value: object) -> str:
    """How OpenAI's errors name the JSON type of `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number" if isinstance(value, float) else "an integer"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_common(body: JsonObject, token_limits: tuple[str, ...]) -> ApiError | None:
    """The checks both APIs make alike: stream, user, metadata and the output token limits
    named in `token_limits` (integers of at least 1; Responses' max_output_tokens 16)."""
    if "stream" in body and body["stream"] is not None and not isinstance(body["stream"], bool):
        return wrong_type("stream", "a boolean", body["stream"])
    for field in ("user", "prompt_cache_key"):
        if field in body and not isinstance(body[field], str):
            return wrong_type(field, "a string", body[field])
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            return wrong_type("metadata", "an object", metadata)
        for key, value in metadata.items():
            if not isinstance(value, str):
                return wrong_type(f"metadata.{key}", "a string", value)
    for name in token_limits:
        value = body.get(name)
        if value is None:
            continue
        if not is_int(value):
            return wrong_type(name, "an integer", value)
        minimum = 16 if name == "max_output_tokens" else 1
        if value < minimum:
            return invalid(
                f"Invalid '{name}': integer below minimum value. Expected a value >= "
                f"{minimum}, but got {value} instead.",
                name,
                "integer_below_min_value",
            )
    return None


def check_tool_name(name: object, param: str) -> ApiError | None:
    """OpenAI refuses function names outside [a-zA-Z0-9_-]{1,64} (an MCP tool's "srv.tool"
    is refused there, though Anthropic takes it)."""
    if not isinstance(name, str):
        return missing(param) if name is None else wrong_type(param, "a string", name)
    if not _TOOL_NAME.match(name):
        detail = "string too long" if len(name) > 64 else "string does not match pattern"
        return invalid(
            f"Invalid '{param}': {detail}. Expected a string that matches the pattern "
            "'^[a-zA-Z0-9_-]+$'" + (" with a maximum length of 64." if len(name) > 64 else "."),
            param,
            "invalid_value",
        )
    return None


def check_tools(
    body: JsonObject, check_function: Callable[[str, JsonObject], ApiError | None]
) -> ApiError | None:
    """The 400 for `body`'s tools, or None: they are an array of objects, each with its
    `type`; each function tool is checked by `check_function(where, tool)` (`where` is
    its place, `tools[k]`), in order. Other tools (custom, hosted) are let by."""
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return wrong_type("tools", "an array", tools)
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return wrong_type(f"tools[{k}]", "an object", tool)
        if "type" not in tool:
            return missing(f"tools[{k}].type")
        if tool["type"] == "function":
            problem = check_function(f"tools[{k}]", tool)
            if problem is not None:
                return problem
    return None


FINISH_REASONS: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""A script's stop reason as Chat's `finish_reason` (Responses derives its status from it)."""
