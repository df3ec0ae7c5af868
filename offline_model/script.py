"""Scripts for the offline model: which reply each request gets.

A script maps a conversation key to a list of steps. The key "*" is a template: a key that the
script does not list plays its own fresh copy of the "*" steps. The key of a request is its
`metadata.user_id` on the Anthropic Messages API, its `user` on OpenAI's APIs (see
`offline_model.openai_wire.conversation_key`), or "default" when it has none.

Which step of its key a request gets is the script's `pick` (`offline_model.player` has the
rules): "order" (the default) plays the steps one after the other, each request taking the
next one this player has not played; "turn" picks the step from the request itself, by the
number of assistant turns in the conversation it is sent, so several players (several
processes, each with its own copy of the script) play one conversation in script order. A
step with a `match` answers a request whose last user text it matches, in either mode.
Docs: docs/offline-script.md.

A step either replies (one assistant message built from `text`, `tool_use` and `thinking`
parts), answers with an API error, or hangs. Timing fields shape how the answer is delivered:
`delay_ms` before the response headers, `chunk_delay_ms` between streamed deltas,
`wait_for` holds the answer until a named gate is released, `cut_after_chunks` and
`stall_after_chunks` break the stream part-way.

The script is written in the Anthropic API's terms (content blocks, stop reasons, usage fields,
error types) and the same file plays on every wire the server speaks. On OpenAI's wires
(details in `offline_model.openai_chat` and `offline_model.openai_responses`):

- `text` parts: Chat's `message.content` (joined); Responses' `message` items, one each.
- `thinking` parts: Chat's `message.reasoning_content` (joined), where DeepSeek, vLLM and
  other OpenAI-compatible servers put reasoning; Responses' `reasoning` items, one each, the
  text as their summary.
- `tool_use` parts: Chat's `message.tool_calls`; Responses' `function_call` items. The input
  travels as a JSON `arguments` string; a scripted `id` is the call id.
- `stop_reason`: Chat's `finish_reason` (stop, tool_calls, length, content_filter);
  Responses' `status` (completed, or incomplete with its reason).
- `usage`: OpenAI's prompt / input tokens count the cached ones, so they are input_tokens +
  cache_read_input_tokens + cache_creation_input_tokens; `cached_tokens` is the cache read,
  `cache_write_tokens` the cache creation, `reasoning_tokens` the `reasoning_tokens` field.
- `error`: the status is kept, but 529 (Anthropic's overloaded) becomes 503; the body is
  OpenAI's (`{"error": {"message", "type", "param", "code"}}`), Anthropic types mapped to
  OpenAI's (`offline_model.openai_wire.OPENAI_TYPES`).

Scripts load from YAML or JSON with `load_script`, or are built in code with
`Script.model_validate({...})` / `Script.of([...])`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from duragent.offline_model.chaos import Chaos

DEMO_SCRIPT = Path(__file__).parent / "scripts" / "demo.yaml"
"""The bundled demo script: a four-turn session that lists, writes, runs and summarises."""

TEMPLATE_KEY = "*"
DEFAULT_KEY = "default"

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]

# The error type the real API uses for each status; a scripted error may override it.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


class TextPart(BaseModel):
    """`- text: "..."`: a text content block."""

    model_config = ConfigDict(extra="forbid")

    text: str


class ToolUseSpec(BaseModel):
    """The body of a `tool_use` part. `id` is generated ("toolu_" + 24 chars) when absent."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ToolUsePart(BaseModel):
    """`- tool_use: {name, input, id?}`: a tool call content block."""

    model_config = ConfigDict(extra="forbid")

    tool_use: ToolUseSpec


class ThinkingPart(BaseModel):
    """`- thinking: "..."`: a thinking block; `signature` is generated when absent."""

    model_config = ConfigDict(extra="forbid")

    thinking: str
    signature: str | None = None


def _part_kind(value: Any) -> str | None:
    # Route each part by the key it carries, so a typo reports against one shape instead of
    # listing every union member's failures.
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        for kind in ("text", "tool_use", "thinking"):
            if kind in value:
                return kind
    return None


ReplyPart = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ToolUsePart, Tag("tool_use")]
    | Annotated[ThinkingPart, Tag("thinking")],
    Discriminator(
        _part_kind,
        custom_error_type="invalid_reply_part",
        custom_error_message="a reply part needs exactly one of: text, tool_use, thinking",
    ),
]


class ScriptedUsage(BaseModel):
    """Token counts to report instead of the estimates (about one token per 4 characters)."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Of the output tokens, those spent reasoning: OpenAI reports them (`reasoning_tokens`),
    Anthropic does not. Estimated from the thinking parts when absent (0 without any)."""


class ScriptedError(BaseModel):
    """An API error answer: HTTP `status` with the API's error JSON.

    `type` defaults to the real API's type for the status (529 -> overloaded_error, 429 ->
    rate_limit_error, ...; api_error for other 5xx, invalid_request_error for other 4xx).
    `retry_after` (seconds) adds a `retry-after` header; `should_retry` adds the API's
    `x-should-retry: true|false` header, its advice on retrying whatever the status.
    `code` is the `error.code` of OpenAI's error body (e.g. "context_length_exceeded"); the
    Anthropic body has no such field.
    """

    model_config = ConfigDict(extra="forbid")

    status: int = Field(ge=400, le=599)
    type: str | None = None
    message: str | None = None
    retry_after: float | None = Field(default=None, ge=0)
    should_retry: bool | None = None
    code: str | None = None

    @property
    def error_type(self) -> str:
        if self.type is not None:
            return self.type
        fallback = "api_error" if self.status >= 500 else "invalid_request_error"
        return ERROR_TYPES.get(self.status, fallback)

    @property
    def error_message(self) -> str:
        return self.message if self.message is not None else self.error_type.replace("_", " ")


class Step(BaseModel):
    """One scripted answer, consumed by one request of its key (under `pick: turn` a turn's
    answer answers every request of its turn: see `offline_model.player.ScriptPlayer.take`).

    Exactly one of `reply` or `error` is required, except for `hang: true` steps, which take
    neither and never answer (the server ends them with a 500 api_error when it stops).

    - `stop_reason`: defaults to "tool_use" when the reply has a tool_use part, else "end_turn".
    - `stop_sequence`: reported with stop_reason "stop_sequence" (defaults to the request's
      first `stop_sequences` entry).
    - `usage`: token counts to report instead of estimates.
    - `delay_ms`: wait before sending the response headers.
    - `chunk_delay_ms`: wait before each streamed delta event after the first.
    - `wait_for`: hold the answer until the named gate is released (gates stay open once
      released).
    - `cut_after_chunks`: drop the connection once this many delta events have been sent (or,
      when the reply has fewer, just before the stream's end: Anthropic's `message_stop`,
      Chat's finish chunk, Responses' `response.completed`). A non-streaming request gets its
      headers and half of its body, then the drop.
    - `stall_after_chunks`: like `cut_after_chunks`, but keep the connection open and silent
      until the server stops.
    """

    model_config = ConfigDict(extra="forbid")

    reply: list[ReplyPart] | None = None
    error: ScriptedError | None = None
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: ScriptedUsage | None = None
    delay_ms: int = Field(default=0, ge=0)
    chunk_delay_ms: int = Field(default=0, ge=0)
    cut_after_chunks: int | None = Field(default=None, ge=0)
    stall_after_chunks: int | None = Field(default=None, ge=0)
    hang: bool = False
    wait_for: str | None = Field(default=None, min_length=1)
    match: str | None = Field(default=None, min_length=1)
    """A regular expression: this step answers the first request whose last user message
    matches it, out of order (e.g. a compaction's summary request)."""
    repeat: bool = False
    """With `match`: answer every matching request, never used up."""

    @model_validator(mode="after")
    def _one_outcome(self) -> Step:
        outcomes = (self.reply is not None) + (self.error is not None)
        if self.hang and outcomes:
            raise ValueError("a hang step takes neither reply nor error")
        if not self.hang and outcomes != 1:
            raise ValueError("a step needs exactly one of: reply, error (or hang: true)")
        if self.cut_after_chunks is not None and self.stall_after_chunks is not None:
            raise ValueError("a step takes at most one of: cut_after_chunks, stall_after_chunks")
        return self

    @property
    def answers(self) -> bool:
        """Whether it ends its turn with a reply: a reply delivered whole (not cut or
        stalled). An error, a hang, a cut or stalled stream fail the request instead."""
        return (
            self.reply is not None
            and self.cut_after_chunks is None
            and self.stall_after_chunks is None
        )

    @property
    def has_tool_use(self) -> bool:
        return any(isinstance(part, ToolUsePart) for part in self.reply or [])


Pick = Literal["order", "turn"]
"""How a request's step is chosen: see `Script.pick`."""


class Script(BaseModel):
    """Conversations by key (the requests' conversation key), and what to do once one runs out.

    `when_exhausted`: "reply" answers with the text "(offline script finished)" and end_turn;
    "error" answers 500 api_error naming the key. `chaos`: random latency and faults on
    every request (`offline_model.chaos`). `pick`: "order" or "turn" (see the module and
    `offline_model.player.ScriptPlayer.take`).
    """

    model_config = ConfigDict(extra="forbid")

    pick: Pick = "order"
    when_exhausted: Literal["reply", "error"] = "reply"
    chaos: Chaos | None = None
    conversations: dict[str, list[Step]] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        steps: list[Step] | list[dict[str, Any]],
        *,
        key: str = TEMPLATE_KEY,
        when_exhausted: Literal["reply", "error"] = "reply",
        chaos: Chaos | dict[str, Any] | None = None,
        pick: Pick = "order",
    ) -> Script:
        """A script with one conversation (by default the "*" template) of `steps`."""
        return cls.model_validate(
            {
                "pick": pick,
                "when_exhausted": when_exhausted,
                "conversations": {key: steps},
                "chaos": chaos,
            }
        )


def load_script(path: str | Path) -> Script:
    """Read and validate a script file: JSON when the name ends in .json, else YAML.

    Raises OSError when the file cannot be read and pydantic.ValidationError (or the parser's
    error) when its content is not a valid script.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    return Script.model_validate(data if data is not None else {})
