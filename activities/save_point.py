"""The save point (docs/SPEC.md, sessions): commit a finished turn to the session tree.

The turn's staged messages go in first, in call order (the assistant message, then its
tool results), then the pending writes and queued messages. The session leaf moves to
the end of that chain, and display messages and events are written, all in one
transaction. Entry ids were chosen by the workflow and events carry dedup keys, so
committing the same turn twice changes nothing.

Whatever the turn left unfinished, the stored transcript stays valid: a tool call
without a result gets one saying so. The whole protocol, from the ids the workflow fixes
to the commit known saved: docs/ARCHITECTURE.md, "The save point".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel
from sqlalchemy.orm import Session
from temporalio.exceptions import ApplicationError

from duragent.domain.entries import CustomMessageEntry, MessageEntry, SessionEntry
from duragent.domain.events import (
    MessageEnd,
    MessageStart,
    QueueConsumed,
    SavePoint,
    TurnEnd,
    TurnStart,
)
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    Usage,
)
from duragent.domain.save_points import TurnCommit, result_entry_id
from duragent.domain.transcript import MISSING_RESULT_TEXT
from duragent.store import entries, events, runs, sessions, staging
from duragent.store.append import append_below
from duragent.store.cursor_order import hold_numbering
from duragent.store.events import keyed


def save_point(
    db: Session,
    *,
    session_id: str,
    run_id: str,
    parent_id: str,
    data: TurnCommit,
    cache: entries.EntryCache | None = None,
    found: staging.Found | None = None,
) -> str:
    """Commit `data` below `parent_id`; returns the new leaf id. With `cache`, the
    appended entries and the new path are remembered there. `found` is what
    `find_commit` read for `data` in this transaction, if the caller read it."""
    slot_ids = [slot.entry_id for slot in data.slots]
    # A save point may run again (a retried step, a replayed workflow task): what it
    # committed the first time is read back, so the chain and its leaf come out the same.
    # One statement tells what is stored and what is staged.
    found = found or find_commit(db, session_id, data)
    stored = {i: e for i, e in found.stored.items() if isinstance(e, MessageEntry)}
    staged = found.staged
    turn_messages: list[tuple[str, AgentMessage]] = []
    for slot in data.slots:
        earlier = stored.get(slot.entry_id)
        message = earlier.message if earlier else staged.get(slot.entry_id) or slot.fallback
        if message is None:
            raise ApplicationError(
                f"nothing staged for entry {slot.entry_id} and no fallback given",
                non_retryable=True,
            )
        turn_messages.append((slot.entry_id, message))
    turn_entries: list[SessionEntry] = [
        MessageEntry(id=entry_id, parent_id=None, timestamp=m.timestamp, message=m)
        for entry_id, m in with_missing_results(
            turn_messages, lambda ids: staging.staged_messages(db, ids)
        )
    ]
    appended = append_below(
        db,
        session_id,
        parent_id,
        [*turn_entries, *data.entries],
        run_id=run_id,
        cache=cache,
        known=found.is_stored(),
    )
    committed = appended.committed
    staging.drop_staged(db, [entry.id for entry in turn_entries])  # the slots', and results found
    leaf_id = appended.leaf_id or parent_id
    if data.session_config is not None:
        sessions.set_session_wide_config(db, session_id, data.session_config)
    runs.update_run(db, run_id, turns=data.turn, usage=data.usage, phase="turn")

    queued = committed[len(turn_entries) :]
    saved = SavePoint(
        turn=data.turn,
        leaf_id=leaf_id,
        entries_committed=len(committed),
        pending_writes_flushed=sum(1 for e in queued if not is_message(e)),
    )
    # A commit without slots carries only input that queued up between turns (after a
    # compaction, say): it ends no turn and starts none, and its events get keys of
    # their own.
    key = f"{run_id}/turn-{data.turn}"
    turn_events: list[BaseModel] = [saved]
    if data.slots:
        assistant = turn_entries[0] if turn_entries else None
        ended = TurnEnd(
            turn=data.turn,
            assistant_entry_id=slot_ids[0],
            tool_result_entry_ids=slot_ids[1:],
            stop_reason=_stop_reason(assistant),
        )
        turn_events = [ended, saved, *([TurnStart(turn=data.turn + 1)] if data.continues else [])]
    elif committed:
        key = f"{key}/inputs-{committed[0].id}"
    if data.continues:
        turn_events += message_events(queued)
        turn_events += [
            QueueConsumed(queue=c.queue, entry_id=c.entry_id, turn=data.turn + 1)
            for c in data.consumed
        ]
    turn_events += data.events
    events.append_events(db, session_id, run_id, keyed(key, turn_events))
    return leaf_id


def find_commit(
    db: Session, session_id: str, data: TurnCommit, staged_too: Sequence[str] = ()
) -> staging.Found:
    """What is stored of `data`'s entries, and what is staged for its slots (and for
    `staged_too`), in one statement; read under the session's numbering lock, so that
    an attempt staging a message for one of them meanwhile either staged it before (and
    it is read here) or finds it stored (`staging.stage_message`)."""
    hold_numbering(db, session_id)
    slot_ids = [slot.entry_id for slot in data.slots]
    return staging.find(
        db,
        stored_ids=[*slot_ids, *(e.id for e in data.entries)],
        staged_ids=[*slot_ids, *staged_too],
    )


def uncounted_usage(data: TurnCommit, found: staging.Found) -> Usage:
    """The usage of the replies in `data` that the workflow never got (`uncounted`
    slots): staged by a model call it stopped, or stored by an earlier try of this save."""
    usage = Usage()
    for slot in data.slots:
        if not slot.uncounted:
            continue
        earlier = found.stored.get(slot.entry_id)
        message = (
            earlier.message
            if isinstance(earlier, MessageEntry)
            else found.staged.get(slot.entry_id)
        )
        if isinstance(message, AssistantMessage):
            usage = usage.plus(message.usage)
    return usage


def with_missing_results(
    messages: list[tuple[str, AgentMessage]],
    staged: Callable[[list[str]], Mapping[str, AgentMessage]],
) -> list[tuple[str, AgentMessage]]:
    """Add a result for each tool call of the turn's assistant message that has none
    among the turn's messages (a stored call must always have its result): the one staged
    under the call's own id (`result_entry_id`: a turn aborted in its activity staged
    what its calls did), else an error saying it is missing."""
    if not messages or not isinstance(messages[0][1], AssistantMessage):
        return messages
    assistant_id, assistant = messages[0][0], messages[0][1]
    answered = {m.tool_call_id for _, m in messages[1:] if isinstance(m, ToolResultMessage)}
    missing = [call for call in assistant.tool_calls if call.id not in answered]
    if not missing:
        return messages
    ids = [result_entry_id(assistant_id, call.id) for call in missing]
    found = staged(ids)
    results: list[tuple[str, AgentMessage]] = []
    for call, entry_id in zip(missing, ids, strict=True):
        result = found.get(entry_id)
        if not isinstance(result, ToolResultMessage) or result.tool_call_id != call.id:
            result = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=MISSING_RESULT_TEXT)],
                is_error=True,
                timestamp=assistant.timestamp,
            )
        results.append((entry_id, result))
    return [*messages, *results]


def _stop_reason(entry: SessionEntry | None) -> str | None:
    if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        return entry.message.stop_reason
    return None


def is_message(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry | CustomMessageEntry)


def message_events(items: Sequence[SessionEntry]) -> list[BaseModel]:
    out: list[BaseModel] = []
    for entry in items:
        if isinstance(entry, MessageEntry):
            out += [
                MessageStart(entry_id=entry.id, message=entry.message),
                MessageEnd(entry_id=entry.id, message=entry.message),
            ]
    return out
