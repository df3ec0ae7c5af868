"""Messages of an agent session: what the model reads and writes.

Three roles come from the model API (user, assistant, toolResult); a fourth, `custom`,
carries extension-defined messages that the LLM conversion step may drop or rewrite.
Timestamps are milliseconds since the epoch, always supplied by the caller so that
workflow code can use `workflow.now()`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class TextContent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"] = "text"
    text: str


class ImageContent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image"] = "image"
    media_type: str
    data: str
    """Base64-encoded image bytes."""


class ThinkingContent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    """Provider signature that must travel back with the block on the next request."""
    redacted: bool = False


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


UserContent = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent = Annotated[TextContent | ThinkingContent | ToolCall, Field(discriminator="type")]
ToolResultContent = UserContent

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """Of the output tokens, those the model spent reasoning (OpenAI reports them):
    already counted in `output_tokens`, kept for display only."""

    @model_serializer(mode="wrap")
    def _without_reasoning(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only a reply that reasoned carries it: every other usage is stored as it always was.
        data: dict[str, Any] = handler(self)
        if not data.get("reasoning_tokens"):
            data.pop("reasoning_tokens", None)
        return data

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ScheduledMark(BaseModel):
    """What says a user message was sent by a schedule, not typed by a person
    (`duragent schedule`): shown as such in `duragent history` and on the page."""

    model_config = ConfigDict(extra="forbid")

    schedule_id: str
    scheduled_at: int
    """The time the schedule fired for (ms since the epoch): its nominal time, which a
    catch-up after an outage delivers late."""


class UserMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["user"] = "user"
    content: list[UserContent]
    timestamp: int
    scheduled: ScheduledMark | None = None
    """Set on a prompt a schedule sent (never sent to the model)."""

    @model_serializer(mode="wrap")
    def _without_schedule(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only a scheduled prompt carries it: every other message is stored as it always was.
        data: dict[str, Any] = handler(self)
        if data.get("scheduled") is None:
            data.pop("scheduled", None)
        return data


class AssistantMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    timestamp: int

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]


class ToolResultMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent]
    details: dict[str, Any] | None = None
    """Structured data for logs and UIs; never sent to the model."""
    is_error: bool = False
    timestamp: int


class CustomMessage(BaseModel):
    """An extension-defined message kept in the session alongside the model's.

    `display` says whether UIs show it; `send_to_model` says whether the default LLM
    conversion passes its content to the model as user text.
    """

    model_config = ConfigDict(extra="forbid")

    role: Literal["custom"] = "custom"
    custom_type: str
    content: list[UserContent]
    display: bool = True
    send_to_model: bool = True
    details: dict[str, Any] | None = None
    timestamp: int
    model: str | None = None
    """For a message a model call wrote (a compaction or branch summary): its model."""
    usage: Usage | None = None
    """For a message a model call wrote: the usage it reported, counted in the session's
    cost as an assistant message's is (`store.usage`)."""

    @model_serializer(mode="wrap")
    def _without_call(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Only a model's message carries these: every other one is stored as it always was.
        data: dict[str, Any] = handler(self)
        for key in ("model", "usage"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


AgentMessage = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage | CustomMessage,
    Field(discriminator="role"),
]


def text_of(content: list[Any]) -> str:
    """The text blocks of a content list, joined by newlines."""
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


def user_text(text: str, timestamp: int) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)
