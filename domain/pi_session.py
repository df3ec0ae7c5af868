"""pi's session files (the coding agent's JSONL, session version 2 and later) as our entries.

pi (npm `@mariozechner/pi-coding-agent`) writes session version 2 from 0.31.0 and
version 3 from 0.35.0 on (0.73.1, the latest checked, still writes 3; version 3 renamed
the `hookMessage` role `custom`). `tests/fixtures/pi/` holds files its own writer made.
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
  entries of the same name. A compaction whose `firstKeptEntryId` is itself, or no
  earlier entry, keeps nothing of the path before it, in pi's reading and ours (it
  names itself here); a branch summary back to before the first entry (pi's `fromId`
  `"root"`) names itself as its origin.
- An entry type or message role this module does not know (a later pi's, an
  extension's) is kept as a custom entry, `pi_<type>` or `pi_<role>_message`, with the
  line's fields as its data: in the tree, exported again, never sent to the model.

What does not map, or not exactly, and what the import reports (`ImportNote`s: each kind
of thing dropped, kept as custom or changed, with how often):

- Version 1 files (no entry ids) are refused: opening one in pi upgrades it.
- A compaction's `retainedTail` (messages kept inside the compaction entry) has no place
  here: a file with one is refused.
- The compaction and branch summaries reach the model with our wording around them,
  not pi's (`<summary>` tags); the summary texts are pi's.
- pi takes a path's model from its last assistant message too; here the session's model
  is the one pi resumes the leaf with (the last model change or assistant message on its
  path), and on a path only `model_change` entries change it. Thinking levels `xhigh`
  and `max` become `high`.
- Usage keeps its token counts; pi's cost figures are dropped, and the imported messages
  count in no run's cost here (they were paid for elsewhere).
- Thinking keeps its signature only from Anthropic's API (another provider's would be
  refused by it); tool call ids get any character Anthropic's API refuses replaced by `_`
  (in the call and its result alike). `details` and `data` that are not objects are kept
  wrapped, as `{"value": ...}`.
- Every other field is dropped and reported by name (`usage.cost`, `textSignature`,
  `thoughtSignature`, `fromHook`, `fullOutputPath`, a branch summary's `details`, the
  header's `cwd`, ...), unless it holds nothing (null, false, empty).
- A `session_info` without a name, and a `leaf` entry whose target is null (back before
  the first entry), become custom entries (`pi_session_info`, `pi_leaf`).

This module maps; pi's lines are read by the models of `domain/pi_format.py`, and the
notes are counted by `domain/pi_import_notes.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pydantic import ValidationError

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
from duragent.domain.pi_format import (
    ENTRY_TYPES,
    MESSAGE_ROLES,
    PI_ENTRY,
    PiActiveToolsChange,
    PiAssistant,
    PiBashExecution,
    PiBranchSummary,
    PiCompaction,
    PiCustom,
    PiCustomEntry,
    PiCustomMessageEntry,
    PiEntry,
    PiHeader,
    PiImage,
    PiLabel,
    PiLeaf,
    PiMessageEntry,
    PiModelChange,
    PiSessionInfo,
    PiText,
    PiThinking,
    PiThinkingLevelChange,
    PiToolCall,
    PiToolResult,
    PiUnknown,
    PiUser,
)
from duragent.domain.pi_import_notes import PiImportNotes
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
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")
"""An entry type or message role we do not know, kept in a custom entry's type."""
_ENTRY_FIELDS = ("type", "id", "parentId", "timestamp")


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
    reader = _Reader()
    reader.notes.dropped(header, "the session header")
    entries: list[NumberedEntry] = []
    leaf_id: str | None = None
    last_line = first.number
    name: str | None = None
    for line in lines:
        numbered, leaf_id = reader.entry(line)
        entries.append(numbered)
        last_line = line.number
        if isinstance(numbered.entry, SessionInfoEntry):
            name = numbered.entry.name
    check_tree(entries, leaf_id, last_line)
    return SessionFile(
        kind="pi",
        source_id=header.id,
        name=name,
        config=None,
        leaf_id=leaf_id,
        entries=entries,
        model=_resumed_model([numbered.entry for numbered in entries], leaf_id),
        notes=reader.notes.notes(),
    )


def _resumed_model(entries: list[SessionEntry], leaf_id: str | None) -> str | None:
    """The model pi resumes the leaf with (its `buildSessionContext`): on the leaf's path,
    the last model change or assistant message. The new session takes it as its model,
    so a path whose model change lies on a branch left behind keeps its model."""
    by_id = {entry.id: entry for entry in entries}
    entry = by_id.get(leaf_id) if leaf_id is not None else None
    while entry is not None:  # from the leaf back: the first one found is the last
        if isinstance(entry, ModelChangeEntry):
            return entry.model
        message = entry.message if isinstance(entry, MessageEntry) else None
        if isinstance(message, AssistantMessage) and message.model:
            return message.model
        entry = by_id.get(entry.parent_id) if entry.parent_id is not None else None
    return None


class _Reader:
    """Reads a file's entries in order: the ids seen so far (what a link may name) and
    the notes of what was not taken as it was."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.notes = PiImportNotes()

    def entry(self, line: Line) -> tuple[NumberedEntry, str | None]:
        """The entry of one line, and the leaf if this line is the file's last."""
        unknown = _unknown(line.data)
        if unknown is not None:
            entry: SessionEntry = self._custom(line, unknown)
            leaf: str | None = entry.id
        else:
            try:
                pi = PI_ENTRY.validate_python(line.data)
            except ValidationError as error:
                kind = line.data.get("type")
                what = f"pi {kind!r} entry" if isinstance(kind, str) else "pi entry"
                reason = f"{what}: {validation_reason(error)}"
                raise SessionFileRefused(line.number, reason) from None
            try:
                entry = self._convert(pi, line.number)
            except ValidationError as error:
                reason = f"pi {pi.type!r} entry: {validation_reason(error)}"
                raise SessionFileRefused(line.number, reason) from None
            leaf = pi.target_id if isinstance(pi, PiLeaf) else entry.id
        self.seen.add(entry.id)
        return NumberedEntry(line=line.number, entry=entry), leaf

    def _custom(self, line: Line, unknown: str) -> CustomEntry:
        """An entry type or message role we do not know (`unknown`: the custom type)."""
        try:
            base = PiUnknown.model_validate(line.data)
        except ValidationError as error:
            kind = line.data.get("type")
            reason = f"pi {kind!r} entry: {validation_reason(error)}"
            raise SessionFileRefused(line.number, reason) from None
        data = {k: v for k, v in line.data.items() if k not in _ENTRY_FIELDS}
        what = (
            f"pi `{base.type}` entries, as `{unknown}`"
            if base.type != "message"
            else f"pi `{data['message']['role']}` messages, as `{unknown}` (not sent to the model)"
        )
        self.notes.add("custom", what)
        return CustomEntry(
            id=base.id,
            parent_id=base.parent_id,
            timestamp=_millis(base.timestamp, line.number),
            custom_type=unknown,
            data=data,
        )

    def _convert(self, pi: PiEntry, number: int) -> SessionEntry:
        base: dict[str, Any] = {
            "id": pi.id,
            "parent_id": pi.parent_id,
            "timestamp": _millis(pi.timestamp, number),
        }
        if isinstance(pi, PiMessageEntry):
            where = f"{pi.message.role} messages"
            self.notes.dropped(pi.message, where)
            return MessageEntry(**base, message=self._message(pi.message))
        self.notes.dropped(pi, f"{pi.type} entries")
        if isinstance(pi, PiModelChange):
            return ModelChangeEntry(**base, model=pi.model_id, provider=pi.provider)
        if isinstance(pi, PiThinkingLevelChange):
            level = _THINKING.get(pi.thinking_level)
            if level is None:
                raise SessionFileRefused(number, f"unknown thinking level {pi.thinking_level!r}")
            if level != pi.thinking_level:
                self.notes.add("changed", f"thinking level `{pi.thinking_level}`, as `{level}`")
            return ThinkingLevelChangeEntry(**base, thinking_level=level)
        if isinstance(pi, PiActiveToolsChange):
            return ActiveToolsChangeEntry(**base, active_tools=pi.active_tool_names)
        if isinstance(pi, PiCompaction):
            return self._compaction(pi, base, number)
        if isinstance(pi, PiBranchSummary):
            origin = pi.from_id
            if origin not in self.seen:
                # pi writes "root" for a summary back to before the first entry; it reads
                # `fromId` nowhere, so any other id that names no entry says no more.
                if origin != "root":
                    what = "a branch summary's `fromId` naming no earlier entry (as none)"
                    self.notes.add("changed", what)
                origin = pi.id
            return BranchSummaryEntry(**base, from_entry_id=origin, summary=pi.summary)
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
            if pi.name and pi.name.strip():
                return SessionInfoEntry(**base, name=pi.name.strip())
            self.notes.add(
                "custom", "pi `session_info` entries without a name, as `pi_session_info`"
            )
            return CustomEntry(**base, custom_type="pi_session_info")
        if pi.target_id is not None:
            return LeafEntry(**base, target_id=pi.target_id)
        self.notes.add("custom", "pi `leaf` entries back before the first entry, as `pi_leaf`")
        return CustomEntry(**base, custom_type="pi_leaf", data={"target_id": None})

    def _compaction(self, pi: PiCompaction, base: dict[str, Any], number: int) -> CompactionEntry:
        if pi.retained_tail:
            raise SessionFileRefused(
                number, "a compaction with a retainedTail does not map to duragent's compaction"
            )
        first_kept = pi.first_kept_entry_id
        if first_kept != pi.id and first_kept not in self.seen:
            # pi keeps from that entry only when it is on the path before the compaction:
            # one that is no earlier entry keeps nothing, as naming itself says here.
            self.notes.add(
                "changed",
                "a compaction's `firstKeptEntryId` naming no earlier entry (keeps nothing)",
            )
            first_kept = pi.id
        return CompactionEntry(
            **base,
            summary=pi.summary,
            first_kept_entry_id=first_kept,
            tokens_before=pi.tokens_before,
            details=_object(pi.details),
        )

    def _message(
        self, pi: PiUser | PiAssistant | PiToolResult | PiCustom | PiBashExecution
    ) -> AgentMessage:
        if isinstance(pi, PiUser):
            return UserMessage(content=_user_content(pi.content), timestamp=pi.timestamp)
        if isinstance(pi, PiAssistant):
            signed = pi.provider in _ANTHROPIC or pi.api in _ANTHROPIC
            return AssistantMessage(
                content=[self._assistant_block(block, signed) for block in pi.content],
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

    def _assistant_block(
        self, block: PiText | PiThinking | PiToolCall, signed: bool
    ) -> TextContent | ThinkingContent | ToolCall:
        if isinstance(block, PiText):
            return TextContent(text=block.text)
        if isinstance(block, PiThinking):
            if block.thinking_signature and not signed:
                self.notes.add("dropped", "thinking signatures not from Anthropic's API")
            return ThinkingContent(
                thinking=block.thinking,
                signature=block.thinking_signature if signed else None,
                redacted=block.redacted and signed,
            )
        tool_id = _tool_id(block.id)
        if tool_id != block.id:
            self.notes.add(
                "changed", "tool call ids with characters Anthropic's API refuses (each as `_`)"
            )
        return ToolCall(id=tool_id, name=block.name, arguments=block.arguments)


def _unknown(data: dict[str, Any]) -> str | None:
    """The custom type to keep a line in when its entry type or message role is one we
    do not know (and is a name); None for every other line."""
    kind = data.get("type")
    if isinstance(kind, str) and kind not in ENTRY_TYPES:
        if not _NAME.fullmatch(kind):
            return None  # refused by the validation, naming the type
        return f"pi_{kind}"
    message = data.get("message")
    if kind == "message" and isinstance(message, dict):
        role = message.get("role")
        if isinstance(role, str) and role not in MESSAGE_ROLES and _NAME.fullmatch(role):
            return f"pi_{role}_message"
    return None


def bash_execution_text(pi: PiBashExecution) -> str:
    """What pi gives the model for a `!` command (its `bashExecutionToText`)."""
    text = f"Ran `{pi.command}`\n"
    text += f"```\n{pi.output}\n```" if pi.output else "(no output)"
    if pi.cancelled:
        text += "\n\n(command cancelled)"
    elif pi.exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {pi.exit_code}"
    return text


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
