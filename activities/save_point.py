"""The save point (seed 004): commit a finished turn to the session tree.

The turn's staged messages go in first, in call order (the assistant message, then its
tool results), then the pending writes and queued messages. The session leaf moves to
the end of that chain, display messages and events are written, and the next turn's
snapshot is taken, all in one transaction. Entry ids were chosen by the workflow and
events carry dedup keys, so committing the same turn twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel
from sqlalchemy.orm import Session
from temporalio.exceptions import ApplicationError

from domain.config import SnapshotRef
from domain.context import fold_path_state, take_snapshot
from domain.entries import (
    ActiveToolsChangeEntry,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from domain.events import MessageEnd, MessageStart, SavePoint, TurnEnd, TurnStart
from domain.messages import AgentMessage, AssistantMessage, CustomMessage
from domain.turns import SavePointResult, TurnCommit
from store import display, entries, events, runs, sessions, snapshots, staging
from store.events import KeyedEvent


def save_point(
    db: Session,
    *,
    session_id: str,
    run_id: str,
    parent_id: str,
    snapshot: SnapshotRef | None,
    data: TurnCommit,
) -> SavePointResult:
    """Commit `data` below `parent_id`; `snapshot` is the turn's (None when the run ends)."""
    slot_ids = [slot.entry_id for slot in data.slots]
    done = entries.existing_ids(db, [*slot_ids, *(e.id for e in data.entries)])
    staged = staging.staged_messages(db, [i for i in slot_ids if i not in done])
    turn_entries: list[SessionEntry] = []
    for slot in data.slots:
        message = staged.get(slot.entry_id) or slot.fallback
        if message is None and slot.entry_id not in done:
            raise ApplicationError(
                f"nothing staged for entry {slot.entry_id} and no fallback given",
                non_retryable=True,
            )
        if message is not None:
            turn_entries.append(
                MessageEntry(
                    id=slot.entry_id, parent_id=None, timestamp=message.timestamp, message=message
                )
            )
    committed = chain(parent_id, [*turn_entries, *data.entries])
    fresh = [e for e in committed if e.id not in done]
    entries.insert_entries(db, session_id, fresh, run_id=run_id)
    staging.drop_staged(db, slot_ids)
    leaf_id = data.leaf_after(parent_id)
    sessions.set_leaf(db, session_id, leaf_id)
    display.append_display(db, session_id, run_id, displayed(fresh))
    runs.update_run(db, run_id, turns=data.turn, usage=data.usage, phase="turn")

    queued = committed[len(turn_entries) :]
    assistant = turn_entries[0] if turn_entries else None
    turn_events: list[BaseModel] = [
        TurnEnd(
            turn=data.turn,
            assistant_entry_id=slot_ids[0] if slot_ids else None,
            tool_result_entry_ids=slot_ids[1:],
            stop_reason=assistant.message.stop_reason
            if isinstance(assistant, MessageEntry)
            and isinstance(assistant.message, AssistantMessage)
            else None,
        ),
        SavePoint(
            turn=data.turn,
            leaf_id=leaf_id,
            entries_committed=len(committed),
            pending_writes_flushed=sum(1 for e in queued if not is_message(e)),
        ),
    ]
    next_ref: SnapshotRef | None = None
    if data.continues:
        turn_events += [TurnStart(turn=data.turn + 1), *message_events(queued)]
        if snapshot is not None and (data.config_changed or any(is_config(e) for e in queued)):
            next_ref = next_snapshot(db, session_id, snapshot, queued)
    events.append_events(db, session_id, run_id, keyed(f"{run_id}/turn-{data.turn}", turn_events))
    return SavePointResult(leaf_id=leaf_id, snapshot=next_ref)


def next_snapshot(
    db: Session, session_id: str, previous: SnapshotRef, queued: Sequence[SessionEntry]
) -> SnapshotRef:
    """The previous snapshot with the config changes among `queued` and the session's
    latest config applied."""
    last = snapshots.get_snapshot(db, previous.id)
    session = sessions.require_session(db, session_id)
    snapshot = take_snapshot(fold_path_state(last, queued), session.config)
    snapshots.put_snapshot(db, snapshot)
    return SnapshotRef.of(snapshot)


def is_config(entry: SessionEntry) -> bool:
    return isinstance(entry, ModelChangeEntry | ThinkingLevelChangeEntry | ActiveToolsChangeEntry)


def is_message(entry: SessionEntry) -> bool:
    return isinstance(entry, MessageEntry | CustomMessageEntry)


def chain(parent_id: str | None, items: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The entries linked one after another below `parent_id`."""
    linked: list[SessionEntry] = []
    for entry in items:
        linked.append(entry.model_copy(update={"parent_id": parent_id}))
        parent_id = entry.id
    return linked


def displayed(items: Sequence[SessionEntry]) -> list[tuple[str, AgentMessage]]:
    """The chat messages among entries: every message, and custom messages marked display."""
    shown: list[tuple[str, AgentMessage]] = []
    for entry in items:
        if isinstance(entry, MessageEntry):
            shown.append((entry.id, entry.message))
        elif isinstance(entry, CustomMessageEntry) and entry.display:
            shown.append(
                (
                    entry.id,
                    CustomMessage(
                        custom_type=entry.custom_type,
                        content=entry.content,
                        display=True,
                        details=entry.details,
                        timestamp=entry.timestamp,
                    ),
                )
            )
    return shown


def message_events(items: Sequence[SessionEntry]) -> list[BaseModel]:
    out: list[BaseModel] = []
    for entry in items:
        if isinstance(entry, MessageEntry):
            out += [
                MessageStart(entry_id=entry.id, message=entry.message),
                MessageEnd(entry_id=entry.id, message=entry.message),
            ]
    return out


def keyed(prefix: str, items: Sequence[BaseModel]) -> list[KeyedEvent]:
    return [KeyedEvent(key=f"{prefix}/{i}", event=event) for i, event in enumerate(items)]
