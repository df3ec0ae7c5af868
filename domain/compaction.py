"""Compaction (docs/SPEC.md): replace the older part of the context with a summary.

`plan_compaction` chooses the cut: it keeps the most recent `keep_recent_tokens` of the
context and never cuts between a tool call and its result (a kept part never starts
with a tool result). What lies before the cut is summarised, updating the previous
compaction's summary rather than rewriting it. If the cut falls inside a turn (the
first kept message is not the user's), the start of that turn gets its own summary so
the kept part still knows what the user asked.

Token counts are estimates: the last usage the provider reported, plus about four
characters a token for everything after it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from duragent.domain.context import context_entries, entry_messages
from duragent.domain.entries import CompactionEntry, MessageEntry, SessionEntry
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from duragent.domain.models import UnknownModel, model_info, parse_model

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1200
# What the API counts around the content: block types, tool call ids, JSON structure.
BLOCK_TOKENS = {"text": 3, "thinking": 3, "toolCall": 25, "image": 0}
RESULT_TOKENS = 15
SUMMARY_SECTIONS = (
    "Goal",
    "Constraints",
    "Progress",
    "Key decisions",
    "Next steps",
    "Critical context",
)


class CompactionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Compact automatically inside runs when the context nears the window."""
    keep_recent_tokens: int = 20_000
    reserve_tokens: int = 16_384
    """Compact when the context exceeds the model's window minus this."""
    context_window: int | None = None
    """None: the model's known window (`context_window_of`)."""
    summary_max_tokens: int = 4096


class CompactionPlan(BaseModel):
    """Where to cut, decided once (the workflow records it); the summary follows it."""

    model_config = ConfigDict(extra="forbid")

    leaf_id: str
    """The path being compacted ends here; the compaction entry goes below it."""
    first_kept_entry_id: str
    summarized_ids: list[str]
    """Entries whose messages the summary replaces (since the previous compaction)."""
    split_turn_ids: list[str] = []
    """The start of a turn cut in two: summarised on its own."""
    previous_summary_entry_id: str | None = None
    tokens_before: int


def message_tokens(message: AgentMessage) -> int:
    """About how many tokens the API will count for a message."""
    chars = 0
    images = 0
    overhead = RESULT_TOKENS if isinstance(message, ToolResultMessage) else 4
    for block in message.content:
        overhead += BLOCK_TOKENS.get(block.type, 3)
        if isinstance(block, TextContent):
            chars += len(block.text)
        elif isinstance(block, ThinkingContent):
            chars += len(block.thinking)
        elif isinstance(block, ToolCall):
            chars += len(block.name) + len(json.dumps(block.arguments))
        elif isinstance(block, ImageContent):
            images += 1
    return chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS + overhead


def estimate_context_tokens(messages: Sequence[AgentMessage]) -> int:
    """The last reported usage (input + output) plus an estimate for what came after."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.usage.total_tokens > 0:
            reported = message.usage.total_tokens
            return reported + sum(message_tokens(m) for m in messages[index + 1 :])
    return sum(message_tokens(m) for m in messages)


def context_window_of(model: str) -> int:
    """The model's context window (tokens), as the model registry knows it
    (`domain.models.model_info`): 200k for Claude, the model's own for the others it
    knows, 128k for a model it does not know (a bare name that is not Claude's included).

    The workflow calls it, so it is pure and raises for no name: a name the registry
    refuses (stored before names were checked) keeps the window it always had, 200k for a
    `claude` name and 128k for any other, so recorded histories replay as they ran.
    """
    try:
        ref = parse_model(model)
    except UnknownModel:
        return 200_000 if model.startswith("claude") else 128_000
    return model_info(ref).context_window


def _is_cut_point(entry: SessionEntry) -> bool:
    """A kept part may start here: anything but a tool result (its call would be gone)."""
    if isinstance(entry, MessageEntry):
        return not isinstance(entry.message, ToolResultMessage)
    return True


def plan_compaction(path: Sequence[SessionEntry], keep_recent_tokens: int) -> CompactionPlan | None:
    """The cut for compacting `path` (root to leaf), or None if nothing would be removed."""
    if not path:
        return None
    entries = context_entries(path)
    previous = entries[0] if isinstance(entries[0], CompactionEntry) else None
    candidates = list(entries[1:] if previous else entries)
    kept_tokens = 0
    cut = len(candidates)
    for index in range(len(candidates) - 1, -1, -1):
        kept_tokens += sum(message_tokens(m) for m in entry_messages(candidates[index]))
        if kept_tokens >= keep_recent_tokens:
            cut = index
            break
    else:
        return None
    # Never start the kept part at a tool result: keep its call (and a little more) too.
    while cut > 0 and not _is_cut_point(candidates[cut]):
        cut -= 1
    if cut == 0:
        return None
    turn_start = _turn_start(candidates, cut)
    summarized, split = candidates[:turn_start], candidates[turn_start:cut]
    if not summarized and not split:
        return None
    messages = [m for e in entries for m in entry_messages(e)]
    return CompactionPlan(
        leaf_id=path[-1].id,
        first_kept_entry_id=candidates[cut].id,
        summarized_ids=[e.id for e in summarized],
        split_turn_ids=[e.id for e in split],
        previous_summary_entry_id=previous.id if previous else None,
        tokens_before=estimate_context_tokens(messages),
    )


def _turn_start(entries: Sequence[SessionEntry], cut: int) -> int:
    """Index of the user message that began the turn containing `cut` (== cut when the
    cut is at a turn's start)."""
    for index in range(cut, -1, -1):
        entry = entries[index]
        if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
            return index
    return cut


def transcript_text(messages: Sequence[AgentMessage], limit: int = 2000) -> str:
    """Messages as plain text for a summariser; long tool output is cut to `limit` chars."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"[user] {_text(message.content)}")
        elif isinstance(message, CustomMessage):
            lines.append(f"[{message.custom_type}] {_text(message.content)}")
        elif isinstance(message, AssistantMessage):
            text = _text(message.content)
            if text:
                lines.append(f"[assistant] {text}")
            for call in message.tool_calls:
                lines.append(f"[tool call] {call.name} {json.dumps(call.arguments)[:limit]}")
        elif isinstance(message, ToolResultMessage):
            status = "error" if message.is_error else "ok"
            lines.append(
                f"[tool result {message.tool_name}, {status}] {_text(message.content)[:limit]}"
            )
    return "\n".join(lines)


def files_touched(messages: Sequence[AgentMessage]) -> tuple[list[str], list[str]]:
    """(files read, files modified), from the tool calls: read/grep/find vs write/edit."""
    read: list[str] = []
    modified: list[str] = []
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            path = call.arguments.get("path")
            if not isinstance(path, str):
                continue
            target = modified if call.name in ("write", "edit") else read
            if call.name in ("read", "write", "edit") and path not in target:
                target.append(path)
    return read, modified


def summary_prompt(
    conversation: str, previous_summary: str | None, instructions: str | None
) -> str:
    sections = "\n".join(f"## {name}" for name in SUMMARY_SECTIONS)
    parts = [
        "You are compacting a coding agent's conversation so it can continue with less "
        "context. Write a summary another agent can work from, with exactly these sections "
        "(write 'None' for an empty one):",
        sections,
    ]
    if previous_summary:
        parts += [
            "An earlier summary covers what came before. Update it with the new "
            "conversation: keep what still holds, change what changed, add what is new. "
            "Do not drop earlier goals, constraints or decisions that still apply.",
            f"<earlier-summary>\n{previous_summary}\n</earlier-summary>",
        ]
    if instructions:
        parts.append(f"Additional instructions from the user: {instructions}")
    parts.append(f"<conversation>\n{conversation}\n</conversation>")
    return "\n\n".join(parts)


def turn_prefix_prompt(conversation: str) -> str:
    return (
        "The following is the beginning of a turn whose end is kept verbatim in the "
        "context. Summarise in a few sentences what the user asked and what was done so "
        "far in this turn, so the kept part can be understood.\n\n"
        f"<turn-start>\n{conversation}\n</turn-start>"
    )


def merge_files(earlier: list[str], new: list[str]) -> list[str]:
    return [*earlier, *(p for p in new if p not in earlier)]


def compose_summary(
    history: str, turn_prefix: str | None, read: list[str], modified: list[str]
) -> str:
    """The stored summary: the model's, the split turn's, and the files touched (kept in
    the entry's details too, so the next compaction extends the lists)."""
    text = history.strip()
    if turn_prefix:
        text += f"\n\n## Turn in progress at the cut\n{turn_prefix.strip()}"
    text += "\n\n## Files read\n" + ("\n".join(f"- {p}" for p in read) or "None")
    text += "\n\n## Files modified\n" + ("\n".join(f"- {p}" for p in modified) or "None")
    return text


def _text(content: Sequence[object]) -> str:
    return " ".join(b.text for b in content if isinstance(b, TextContent)).strip()
