"""What the offline model's wire protocols share: ids, token estimates, frames and errors.

Each wire protocol is a `WireProtocol`: the Anthropic Messages API (`protocol.py`), OpenAI's
Chat Completions (`openai_chat.py`) and OpenAI's Responses API (`openai_responses.py`). The app
(`app.py`) routes each path to its protocol and plays the same script through the same player;
a protocol only says how a request is keyed and checked, and how a step, a stream and an error
look on its wire.

Errors are decided in the script's terms, which are the Anthropic API's (a status and an error
type such as `overloaded_error`), as an `ApiError`; each protocol turns one into its own status
and body (`WireProtocol.error`).
"""

from __future__ import annotations

import json
import math
import secrets
import string
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Literal

from duragent.offline_model.script import Step, TextPart, ThinkingPart, ToolUsePart

JsonObject = dict[str, Any]

CHUNK_CHARS = 20
"""Streamed text, thinking and tool arguments are split into pieces of this many characters."""

EXHAUSTED_TEXT = "(offline script finished)"

EXHAUSTED_STEP = Step(reply=[TextPart(text=EXHAUSTED_TEXT)])
"""What a key whose steps ran out is answered with under `when_exhausted: reply`."""

_ALNUM = string.ascii_letters + string.digits


def new_id(prefix: str, length: int = 24) -> str:
    """`prefix` + `length` random letters and digits, the shape of the APIs' ids."""
    return prefix + "".join(secrets.choice(_ALNUM) for _ in range(length))


def hex_id(prefix: str) -> str:
    """`prefix` + 48 random hex digits, the shape of the Responses API's ids (resp_, msg_...)."""
    return prefix + secrets.token_hex(24)


def estimate_tokens(value: object) -> int:
    """About one token per 4 characters of `value` (JSON-encoded unless a str), at least 1."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def pieces(text: str) -> list[str]:
    """`text` cut into the pieces a stream sends it in, CHUNK_CHARS characters each."""
    return [text[k : k + CHUNK_CHARS] for k in range(0, len(text), CHUNK_CHARS)]


FrameKind = Literal["delta", "event", "end"]


@dataclass(frozen=True)
class Frame:
    """One server-sent event of a streamed answer, encoded, and what it is to the player.

    "delta" frames carry a piece of text, thinking or tool arguments: they are what
    `chunk_delay_ms` paces and `cut_after_chunks` counts. The "end" frame is the one a cut
    stream never reaches (Anthropic's `message_stop`, Chat's finish chunk, Responses'
    `response.completed`); every other frame is an "event".
    """

    data: bytes
    kind: FrameKind


@dataclass(frozen=True)
class ApiError:
    """An error answer in the script's terms: HTTP status and Anthropic error type.

    `param` and `code` are OpenAI's fields (the parameter at fault, a machine-readable code);
    the Anthropic error body has neither.
    """

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class Counts:
    """The token counts of one reply, in the script's terms (Anthropic's usage fields).

    `input` excludes the cached tokens (`cache_read`, `cache_write`) as Anthropic reports it;
    OpenAI's prompt / input tokens are the sum of the three. `output` includes `reasoning`.
    """

    input: int
    output: int
    cache_read: int
    cache_write: int
    reasoning: int

    @property
    def prompt(self) -> int:
        """OpenAI's prompt_tokens / input_tokens: cached tokens included."""
        return self.input + self.cache_read + self.cache_write


def counts(step: Step, prompt: object) -> Counts:
    """The usage of `step` answering a request whose prompt is `prompt`, for OpenAI's wires.

    Scripted counts win; otherwise input is estimated from `prompt`, output from the reply's
    parts, reasoning from its thinking parts (0 when it has none).
    """
    scripted = step.usage
    parts = [part.model_dump(exclude_none=True) for part in step.reply or []]
    thinking = [part.thinking for part in step.reply or [] if isinstance(part, ThinkingPart)]
    reasoning = scripted.reasoning_tokens if scripted else None
    input_tokens = scripted.input_tokens if scripted else None
    output_tokens = scripted.output_tokens if scripted else None
    return Counts(
        input=estimate_tokens(prompt) if input_tokens is None else input_tokens,
        output=estimate_tokens(parts) if output_tokens is None else output_tokens,
        cache_read=scripted.cache_read_input_tokens if scripted else 0,
        cache_write=scripted.cache_creation_input_tokens if scripted else 0,
        reasoning=(estimate_tokens("".join(thinking)) if thinking else 0)
        if reasoning is None
        else reasoning,
    )


def tool_arguments(part: ToolUsePart) -> str:
    """A tool call's input as OpenAI sends it: a JSON string."""
    return json.dumps(part.tool_use.input, ensure_ascii=False)


class WireProtocol(ABC):
    """One API's wire format, as the app needs it; see the module docstring."""

    request_id_header: str
    """The response header that carries the request id."""
    parse_error: str
    """The message of the 400 for a body that is not a JSON object."""

    @abstractmethod
    def conversation_key(self, body: JsonObject) -> str:
        """The script key of a request (its conversation)."""

    @abstractmethod
    def validate(self, body: JsonObject) -> ApiError | None:
        """The 400 the real API would answer `body` with, or None when it is acceptable."""

    @abstractmethod
    def build(self, step: Step, body: JsonObject) -> JsonObject:
        """The complete response JSON for a reply `step` (ids generated here: call once)."""

    @abstractmethod
    def frames(self, response: JsonObject, body: JsonObject) -> list[Frame]:
        """The stream of `response` (as `build` made it), frame by frame, in API order."""

    @abstractmethod
    def error(self, error: ApiError, request_id: str) -> tuple[int, JsonObject]:
        """The HTTP status and JSON body that carry `error` on this wire."""
