"""A session's conversation as AG-UI messages, for `MESSAGES_SNAPSHOT` (`api/agui_events.py`).

The messages are the transcript's: the path of the session's current branch, as
`duragent show` prints it, each under its entry's id (the id its stream used): user text,
the assistant's text and tool calls, and each tool result, whose AG-UI `error` says why
when the call failed or was denied (the `is_error` the model reads). Entries that are not
messages (model changes, compactions, labels, ...) and custom messages are not in it;
neither is thinking, which AG-UI keeps apart (a snapshot without reasoning messages leaves
the client's own in place).

A snapshot is the whole conversation a client is to hold, and the client sends it back with
its next run input, which the endpoint takes up to `MAX_AGUI_BYTES`: a conversation longer
than half of that keeps its newest messages only, so the next input always fits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from duragent.api.agui_mount import MAX_AGUI_BYTES
from duragent.client.api import DuragentClient
from duragent.domain import messages as domain
from duragent.domain.entries import MessageEntry, SessionEntry

MAX_SNAPSHOT_BYTES = MAX_AGUI_BYTES // 2
"""At most this much conversation (as JSON) in one snapshot: the newest messages."""
FAILED = "the tool call failed"
"""The `error` of a failed call whose result has no text."""


async def conversation(
    client: DuragentClient, session_id: str
) -> tuple[list[Message], list[tuple[str, str]]]:
    """The session's transcript as AG-UI messages, oldest first, and the id and text of
    each input item that waits for a run (next-turn messages, in queue order)."""
    path = await client.tree.path(session_id)
    queue = await client.inputs.queue(session_id)
    waiting = [(item.id, item.text) for item in queue if item.kind == "next_turn"]
    return newest(as_messages(path)), waiting


def as_messages(path: Sequence[SessionEntry]) -> list[Message]:
    """The messages of a path of entries, as AG-UI messages."""
    out: list[Message] = []
    for entry in path:
        if isinstance(entry, MessageEntry) and (message := as_message(entry.id, entry.message)):
            out.append(message)
    return out


def as_message(entry_id: str, message: domain.AgentMessage) -> Message | None:
    """One stored message as an AG-UI message (None for a custom message)."""
    if isinstance(message, domain.UserMessage):
        return UserMessage(id=entry_id, content=domain.text_of(message.content))
    if isinstance(message, domain.AssistantMessage):
        calls = [
            ToolCall(
                id=call.id,
                function=FunctionCall(name=call.name, arguments=json.dumps(call.arguments)),
            )
            for call in message.tool_calls
        ]
        text = domain.text_of(message.content)
        return AssistantMessage(id=entry_id, content=text or None, tool_calls=calls or None)
    if isinstance(message, domain.ToolResultMessage):
        text = domain.text_of(message.content)
        return ToolMessage(
            id=entry_id,
            tool_call_id=message.tool_call_id,
            content=text,
            error=(text or FAILED) if message.is_error else None,
        )
    return None


def newest(messages: list[Message], limit: int = MAX_SNAPSHOT_BYTES) -> list[Message]:
    """The newest of `messages` whose JSON fits in `limit` bytes, oldest first. Tool
    results whose call is left out go too (a client would send them back without it)."""
    kept: list[Message] = []
    size = 0
    for message in reversed(messages):
        size += len(message.model_dump_json(by_alias=True)) + 1
        if size > limit:
            break
        kept.append(message)
    kept.reverse()
    while kept and isinstance(kept[0], ToolMessage):
        kept.pop(0)
    return kept
