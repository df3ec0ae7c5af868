"""pi's session file format as it is written: pydantic models of its header line, of each
entry type and message role it has, and of their content blocks (camelCase fields, as pi
writes them). Reading a line here checks its shape only; `domain/pi_session.py` maps what
is read to our entries, and reports what it drops (`domain/pi_import_notes.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel


class PiModel(BaseModel):
    """pi's JSON: camelCase fields. Fields we do not read are kept aside (pydantic's
    extras) only to be reported as dropped (`PiImportNotes.dropped`)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


class PiHeader(PiModel):
    type: Literal["session"]
    version: int = 1
    id: str = Field(max_length=200)


class PiText(PiModel):
    type: Literal["text"]
    text: str


class PiImage(PiModel):
    type: Literal["image"]
    data: str
    mime_type: str = Field(max_length=100)


class PiThinking(PiModel):
    type: Literal["thinking"]
    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False


class PiToolCall(PiModel):
    type: Literal["toolCall"]
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)


PiUserBlock = Annotated[PiText | PiImage, Field(discriminator="type")]
PiAssistantBlock = Annotated[PiText | PiThinking | PiToolCall, Field(discriminator="type")]


class PiUsage(PiModel):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int | None = None
    """The sum of the four: ours is computed, so nothing of it is lost."""


class PiUser(PiModel):
    role: Literal["user"]
    content: str | list[PiUserBlock]
    timestamp: int


class PiAssistant(PiModel):
    role: Literal["assistant"]
    content: list[PiAssistantBlock] = Field(default_factory=list)
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: PiUsage = Field(default_factory=PiUsage)
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] = "stop"
    error_message: str | None = None
    timestamp: int


class PiToolResult(PiModel):
    role: Literal["toolResult"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    tool_name: str
    content: str | list[PiUserBlock]
    details: Any = None
    is_error: bool = False
    timestamp: int


class PiCustom(PiModel):
    role: Literal["custom", "hookMessage"]
    custom_type: str
    content: str | list[PiUserBlock]
    display: bool = True
    details: Any = None
    timestamp: int


class PiBashExecution(PiModel):
    role: Literal["bashExecution"]
    command: str
    output: str = ""
    exit_code: int | None = None
    cancelled: bool = False
    timestamp: int
    exclude_from_context: bool = False


PiMessage = Annotated[
    PiUser | PiAssistant | PiToolResult | PiCustom | PiBashExecution,
    Field(discriminator="role"),
]
MESSAGE_ROLES = frozenset(
    {"user", "assistant", "toolResult", "custom", "hookMessage", "bashExecution"}
)


class _PiEntry(PiModel):
    id: str
    parent_id: str | None
    timestamp: str


class PiMessageEntry(_PiEntry):
    type: Literal["message"]
    message: PiMessage


class PiModelChange(_PiEntry):
    type: Literal["model_change"]
    provider: str = "anthropic"
    model_id: str = Field(min_length=1, max_length=200)


class PiThinkingLevelChange(_PiEntry):
    type: Literal["thinking_level_change"]
    thinking_level: str


class PiActiveToolsChange(_PiEntry):
    type: Literal["active_tools_change"]
    active_tool_names: list[str]


class PiCompaction(_PiEntry):
    type: Literal["compaction"]
    summary: str
    first_kept_entry_id: str
    tokens_before: int = 0
    details: Any = None
    retained_tail: list[Any] | None = None


class PiBranchSummary(_PiEntry):
    type: Literal["branch_summary"]
    from_id: str
    summary: str


class PiCustomEntry(_PiEntry):
    type: Literal["custom"]
    custom_type: str
    data: Any = None


class PiCustomMessageEntry(_PiEntry):
    type: Literal["custom_message"]
    custom_type: str
    content: str | list[PiUserBlock]
    display: bool = True
    details: Any = None


class PiLabel(_PiEntry):
    type: Literal["label"]
    target_id: str
    label: str | None = None


class PiSessionInfo(_PiEntry):
    type: Literal["session_info"]
    name: str | None = None


class PiLeaf(_PiEntry):
    type: Literal["leaf"]
    target_id: str | None


class PiUnknown(_PiEntry):
    """An entry of a type, or a message of a role, this module does not know: its
    fields are kept whole, in a custom entry."""

    type: str


PiEntry = Annotated[
    PiMessageEntry
    | PiModelChange
    | PiThinkingLevelChange
    | PiActiveToolsChange
    | PiCompaction
    | PiBranchSummary
    | PiCustomEntry
    | PiCustomMessageEntry
    | PiLabel
    | PiSessionInfo
    | PiLeaf,
    Field(discriminator="type"),
]
PI_ENTRY: TypeAdapter[PiEntry] = TypeAdapter(PiEntry)
ENTRY_TYPES = frozenset(
    {
        "message",
        "model_change",
        "thinking_level_change",
        "active_tools_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "leaf",
    }
)
