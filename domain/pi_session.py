"""pi's session files (the coding agent's JSONL, session version 2 and later) as our entries.

pi writes a header line (`{"type": "session", "version": 3, "id", "timestamp", "cwd"}`)
and then one entry per line, each with `id`, `parentId` and an ISO `timestamp`; the leaf
is the last entry (or, for a `leaf` entry last, its target). What maps, entry by entry:

- `message`: user, assistant and tool result messages become ours (camelCase fields
  renamed, an image's `mimeType` as `media_type`, usage as token counts); pi's `custom`
  (in version 2 `hookMessage`) messages become custom messages the model reads; a
  `bashExecution` message (the `!` command) becomes a `bash_execution` custom message
  whose text is what pi gives the model ("Ran `cmd`" and its output), not sent to the
  model when pi excluded it (`!!`).
- `model_change`, `thinking_level_change`, `active_tools_change`, `compaction`,
  `branch_summary`, `custom`, `custom_message`, `label`, `session_info`, `leaf`: the
  entries of the same name.

What does not map, or not exactly:

- Version 1 files (no entry ids) are refused: opening one in pi upgrades it.
- A compaction's `retainedTail` (messages kept inside the compaction entry) has no place
  here: a file with one is refused. `fromHook` is dropped, and so are a branch summary's
  `details` (ours keep none).
- The compaction and branch summaries reach the model with our wording around them,
  not pi's (`<summary>` tags); the summary texts are pi's.
- pi takes a path's model from its last assistant message too; here only `model_change`
  entries (and the session's model) set it. Thinking levels `xhigh` and `max` become
  `high`.
- Usage keeps its token counts; pi's cost figures are dropped, and the imported messages
  count in no run's cost here (they were paid for elsewhere).
- Thinking keeps its signature only from Anthropic's API (another provider's would be
  refused by it); tool call ids get any character Anthropic's API refuses replaced by `_`
  (in the call and its result alike). `textSignature`, `thoughtSignature` and
  `fullOutputPath` are dropped; `details` and `data` that are not objects are kept
  wrapped, as `{"value": ...}`.
- A `session_info` without a name, and a `leaf` entry whose target is null (back before
  the first entry), become custom entries (`pi_session_info`, `pi_leaf`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from duragent.domain.config import ThinkingLevel
from duragent.domain.entries import (
    ActiveToolsChangeEntry,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from duragent.domain.session_file_checks import (
    Line,
    NumberedEntry,
    SessionFile,
    SessionFileRefused,
    check_tree,
    validation_reason,
)

BASH_EXECUTION_TYPE = "bash_execution"
_THINKING: dict[str, ThinkingLevel] = {
    "off": "off",
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}
_TOOL_ID_REFUSED = re.compile(r"[^A-Za-z0-9_-]")
_ANTHROPIC = ("anthropic", "anthropic-messages")


class _Pi(BaseModel):
    """pi's JSON: camelCase fields; fields we do not read are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class PiHeader(_Pi):
    type: Literal["session"]
    version: int = 1
    id: str = Field(max_length=200)


class PiText(_Pi):
    type: Literal["text"]
    text: str


class PiImage(_Pi):
    type: Literal["image"]
    data: str
    mime_type: str = Field(max_length=100)


class PiThinking(_Pi):
    type: Literal["thinking"]
    thinking: str
    thinking_signature: str | None = None
    redacted: bool = False


class PiToolCall(_Pi):
    type: Literal["toolCall"]
    id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)


PiUserBlock = Annotated[PiText | PiImage, Field(discriminator="type")]
PiAssistantBlock = Annotated[PiText | PiThinking | PiToolCall, Field(discriminator="type")]


class PiUsage(_Pi):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


class PiUser(_Pi):
    role: Literal["user"]
    content: str | list[PiUserBlock]
    timestamp: int


class PiAssistant(_Pi):
    role: Literal["assistant"]
    content: list[PiAssistantBlock] = Field(default_factory=list)
    api: str | None = None
    provider: str | None = None
    model: str | None = None
    usage: PiUsage = Field(default_factory=PiUsage)
    stop_reason: Literal["stop", "length", "toolUse", "error", "aborted"] = "stop"
    error_message: str | None = None
    timestamp: int


class PiToolResult(_Pi):
    role: Literal["toolResult"]
    tool_call_id: str = Field(min_length=1, max_length=200)
    tool_name: str
    content: str | list[PiUserBlock]
    details: Any = None
    is_error: bool = False
    timestamp: int


class PiCustom(_Pi):
    role: Literal["custom", "hookMessage"]
    custom_type: str
    content: str | list[PiUserBlock]
    display: bool = True
    details: Any = None
    timestamp: int


class PiBashExecution(_Pi):
    role: Literal["bashExecution"]
    command: str
    output: str = ""
    exit_code: int | None = None
    cancelled: bool = False
    truncated: bool = False
    timestamp: int
    exclude_from_context: bool = False


PiMessage = Annotated[
    PiUser | PiAssistant | PiToolResult | PiCustom | PiBashExecution,
    Field(discriminator="role"),
]


class _PiEntry(_Pi):
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
    details: Any = None


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
_pi_entry: TypeAdapter[PiEntry] = TypeAdapter(PiEntry)


def read_pi_session(first: Line, lines: Iterator[Line]) -> SessionFile:
    """A pi session file (its header read as `first`) as a session to import."""
    try:
        header = PiHeader.model_validate(first.data)
    except ValidationError as error:
        raise SessionFileRefused(first.number, f"pi header: {validation_reason(error)}") from None
    if header.version < 2:
        raise SessionFileRefused(
            first.number,
            f"pi session version {header.version} has no entry ids; open it in pi once "
            "(which upgrades it) and import it again",
        )
    entries: list[NumberedEntry] = []
    leaf_id: str | None = None
    last_line = first.number
    name: str | None = None
    for line in lines:
        numbered, leaf_id = _entry(line)
        entries.append(numbered)
        last_line = line.number
        if isinstance(numbered.entry, SessionInfoEntry):
            name = numbered.entry.name
    check_tree(entries, leaf_id, last_line)
    return SessionFile(
        kind="pi", source_id=header.id, name=name, config=None, leaf_id=leaf_id, entries=entries
    )


def _entry(line: Line) -> tuple[NumberedEntry, str | None]:
    """The entry of one line, and the leaf if this line is the file's last."""
    try:
        pi = _pi_entry.validate_python(line.data)
    except ValidationError as error:
        kind = line.data.get("type")
        what = f"pi {kind!r} entry" if isinstance(kind, str) else "pi entry"
        raise SessionFileRefused(line.number, f"{what}: {validation_reason(error)}") from None
    try:
        entry = _convert(pi, line.number)
    except ValidationError as error:
        reason = f"pi {pi.type!r} entry: {validation_reason(error)}"
        raise SessionFileRefused(line.number, reason) from None
    leaf = pi.target_id if isinstance(pi, PiLeaf) else entry.id
    return NumberedEntry(line=line.number, entry=entry), leaf


def _convert(pi: PiEntry, number: int) -> SessionEntry:
    base: dict[str, Any] = {
        "id": pi.id,
        "parent_id": pi.parent_id,
        "timestamp": _millis(pi.timestamp, number),
    }
    if isinstance(pi, PiMessageEntry):
        return MessageEntry(**base, message=_message(pi.message))
    if isinstance(pi, PiModelChange):
        return ModelChangeEntry(**base, model=pi.model_id, provider=pi.provider)
    if isinstance(pi, PiThinkingLevelChange):
        level = _THINKING.get(pi.thinking_level)
        if level is None:
            raise SessionFileRefused(number, f"unknown thinking level {pi.thinking_level!r}")
        return ThinkingLevelChangeEntry(**base, thinking_level=level)
    if isinstance(pi, PiActiveToolsChange):
        return ActiveToolsChangeEntry(**base, active_tools=pi.active_tool_names)
    if isinstance(pi, PiCompaction):
        if pi.retained_tail:
            raise SessionFileRefused(
                number, "a compaction with a retainedTail does not map to duragent's compaction"
            )
        return CompactionEntry(
            **base,
            summary=pi.summary,
            first_kept_entry_id=pi.first_kept_entry_id,
            tokens_before=pi.tokens_before,
            details=_object(pi.details),
        )
    if isinstance(pi, PiBranchSummary):
        return BranchSummaryEntry(**base, from_entry_id=pi.from_id, summary=pi.summary)
    if isinstance(pi, PiCustomEntry):
        return CustomEntry(**base, custom_type=pi.custom_type, data=_object(pi.data) or {})
    if isinstance(pi, PiCustomMessageEntry):
        return CustomMessageEntry(
            **base,
            custom_type=pi.custom_type,
            content=_user_content(pi.content),
            display=pi.display,
            details=_object(pi.details),
        )
    if isinstance(pi, PiLabel):
        return LabelEntry(**base, target_id=pi.target_id, label=pi.label or None)
    if isinstance(pi, PiSessionInfo):
        if pi.name:
            return SessionInfoEntry(**base, name=pi.name.strip())
        return CustomEntry(**base, custom_type="pi_session_info")
    if pi.target_id is not None:
        return LeafEntry(**base, target_id=pi.target_id)
    return CustomEntry(**base, custom_type="pi_leaf", data={"target_id": None})


def _message(pi: PiUser | PiAssistant | PiToolResult | PiCustom | PiBashExecution) -> AgentMessage:
    if isinstance(pi, PiUser):
        return UserMessage(content=_user_content(pi.content), timestamp=pi.timestamp)
    if isinstance(pi, PiAssistant):
        signed = pi.provider in _ANTHROPIC or pi.api in _ANTHROPIC
        return AssistantMessage(
            content=[_assistant_block(block, signed) for block in pi.content],
            api=pi.api,
            provider=pi.provider,
            model=pi.model,
            usage=Usage(
                input_tokens=pi.usage.input,
                output_tokens=pi.usage.output,
                cache_read_tokens=pi.usage.cache_read,
                cache_write_tokens=pi.usage.cache_write,
            ),
            stop_reason=pi.stop_reason,
            error_message=pi.error_message,
            timestamp=pi.timestamp,
        )
    if isinstance(pi, PiToolResult):
        return ToolResultMessage(
            tool_call_id=_tool_id(pi.tool_call_id),
            tool_name=pi.tool_name,
            content=_user_content(pi.content),
            details=_object(pi.details),
            is_error=pi.is_error,
            timestamp=pi.timestamp,
        )
    if isinstance(pi, PiCustom):
        return CustomMessage(
            custom_type=pi.custom_type,
            content=_user_content(pi.content),
            display=pi.display,
            details=_object(pi.details),
            timestamp=pi.timestamp,
        )
    return CustomMessage(
        custom_type=BASH_EXECUTION_TYPE,
        content=[TextContent(text=bash_execution_text(pi))],
        send_to_model=not pi.exclude_from_context,
        details={"command": pi.command, "exit_code": pi.exit_code, "cancelled": pi.cancelled},
        timestamp=pi.timestamp,
    )


def bash_execution_text(pi: PiBashExecution) -> str:
    """What pi gives the model for a `!` command (its `bashExecutionToText`)."""
    text = f"Ran `{pi.command}`\n"
    text += f"```\n{pi.output}\n```" if pi.output else "(no output)"
    if pi.cancelled:
        text += "\n\n(command cancelled)"
    elif pi.exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {pi.exit_code}"
    return text


def _assistant_block(
    block: PiText | PiThinking | PiToolCall, signed: bool
) -> TextContent | ThinkingContent | ToolCall:
    if isinstance(block, PiText):
        return TextContent(text=block.text)
    if isinstance(block, PiThinking):
        return ThinkingContent(
            thinking=block.thinking,
            signature=block.thinking_signature if signed else None,
            redacted=block.redacted and signed,
        )
    return ToolCall(id=_tool_id(block.id), name=block.name, arguments=block.arguments)


def _user_content(content: str | list[PiText | PiImage]) -> list[TextContent | ImageContent]:
    if isinstance(content, str):
        return [TextContent(text=content)]
    return [
        TextContent(text=block.text)
        if isinstance(block, PiText)
        else ImageContent(media_type=block.mime_type, data=block.data)
        for block in content
    ]


def _tool_id(value: str) -> str:
    """A tool call id as Anthropic's API takes it (`^[a-zA-Z0-9_-]+$`, 64 at most)."""
    return _TOOL_ID_REFUSED.sub("_", value)[:64]


def _object(value: Any) -> dict[str, Any] | None:
    """pi's free-form `details`/`data` as ours (an object, or None)."""
    if value is None or isinstance(value, dict):
        return value
    return {"value": value}


def _millis(timestamp: str, number: int) -> int:
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        raise SessionFileRefused(number, f"timestamp {timestamp[:40]!r} is not ISO 8601") from None
    return max(0, int(moment.timestamp() * 1000))
