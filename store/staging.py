"""Activity outputs waiting for their save point (see `StagedMessageRow`; the protocol:
docs/ARCHITECTURE.md, "The save point")."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import TypeAdapter
from sqlalchemy import (
    Insert,
    bindparam,
    delete,
    exists,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.orm import Session

from duragent.domain.entries import SessionEntry
from duragent.domain.messages import AgentMessage, AssistantMessage
from duragent.store.clock import now_ms
from duragent.store.cursor_order import hold_numbering
from duragent.store.entries import entry_of_row
from duragent.store.errors import EntrySaved
from duragent.store.statements import Tx, dialect_of, execute
from duragent.store.tables import EntryRow, StagedMessageRow, table_of
from duragent.store.upsert import INSERTS as _INSERTS

_message: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)
_staged = table_of(StagedMessageRow)


# Built once (see `store.statements`).
_READ = select(_staged.c.entry_id, _staged.c.payload).where(
    _staged.c.entry_id.in_(bindparam("ids", expanding=True))
)
_entries = table_of(EntryRow)
_FIND = union_all(
    select(
        _entries.c.id,
        _entries.c.parent_id,
        _entries.c.type,
        _entries.c.timestamp,
        _entries.c.payload,
        literal_column("1").label("stored"),
    ).where(_entries.c.id.in_(bindparam("stored_ids", expanding=True))),
    select(
        _staged.c.entry_id,
        null(),
        null(),
        null(),
        _staged.c.payload,
        literal_column("0"),
    ).where(_staged.c.entry_id.in_(bindparam("staged_ids", expanding=True))),
)
_DROP = delete(_staged).where(_staged.c.entry_id.in_(bindparam("ids", expanding=True)))


def stage_message(
    db: Tx, *, entry_id: str, session_id: str, run_id: str, message: AgentMessage
) -> AgentMessage:
    """Store (or replace, on a retried attempt) the message an activity produced, and
    return the message staged now: `message`, unless another attempt staged a finished
    model reply first. That one is kept: the workflow may already have acted on it (an
    attempt on a worker taken for lost can finish after the attempt that replaced it).

    `EntrySaved` when the session stores the entry already: its turn was saved (and its
    staged messages dropped) without this attempt, which is stale, and must not act on
    what it staged (run a reply's calls). The session's numbering lock, which a save point
    takes before it reads what is staged, orders the two."""
    row = {
        "entry_id": entry_id,
        "session_id": session_id,
        "run_id": run_id,
        "payload": message.model_dump(mode="json"),
        "created_at": now_ms(),
    }
    hold_numbering(db, session_id)
    # A retried attempt replaces the payload; the row keeps its session, run and time.
    if execute(db, _stage(dialect_of(db)), row).first() is not None:
        return message
    found = find(db, stored_ids=[entry_id], staged_ids=[entry_id])
    if entry_id in found.stored:
        raise EntrySaved(entry_id)
    return found.staged.get(entry_id, message)


_COLUMNS = ("entry_id", "session_id", "run_id", "payload", "created_at")


@functools.cache
def _stage(dialect: str) -> Insert:
    """Insert unless the entry is stored, or replace the payload unless it holds a
    finished model reply (one that did not end in an abort or an error); returns the
    entry id when it wrote."""
    row = select(*(bindparam(name, type_=_staged.c[name].type) for name in _COLUMNS)).where(
        ~exists().where(_entries.c.id == bindparam("entry_id"))
    )
    statement = _INSERTS[dialect](_staged).from_select(list(_COLUMNS), row)
    kept = _staged.c.payload["role"].as_string() == "assistant"
    kept &= _staged.c.payload["stop_reason"].as_string().not_in(("aborted", "error"))
    return statement.on_conflict_do_update(
        index_elements=["entry_id"], set_={"payload": statement.excluded.payload}, where=~kept
    ).returning(_staged.c.entry_id)


def staged_messages(db: Tx, entry_ids: Sequence[str]) -> dict[str, AgentMessage]:
    if not entry_ids:
        return {}
    rows = execute(db, _READ, {"ids": list(entry_ids)})
    return {row.entry_id: _message.validate_python(row.payload) for row in rows}


def staged_message(db: Tx, entry_id: str) -> AgentMessage | None:
    return staged_messages(db, [entry_id]).get(entry_id)


def drop_staged(db: Session, entry_ids: Sequence[str]) -> None:
    if entry_ids:
        execute(db, _DROP, {"ids": list(entry_ids)})


@dataclass(frozen=True)
class Found:
    """What `find` read: the stored entries and the staged messages among the ids."""

    checked: frozenset[str]
    """The ids looked up among stored entries."""
    stored: dict[str, SessionEntry]
    staged: dict[str, AgentMessage]

    def is_stored(self) -> dict[str, bool]:
        """Whether each checked id is stored."""
        return {i: i in self.stored for i in self.checked}


def find(db: Tx, *, stored_ids: Sequence[str], staged_ids: Sequence[str]) -> Found:
    """The stored entries among `stored_ids` and the staged messages among `staged_ids`,
    in one statement: what a save point needs to know before it writes (has this turn
    been committed before, and what did its activities stage)."""
    rows = execute(db, _FIND, {"stored_ids": list(stored_ids), "staged_ids": list(staged_ids)})
    stored: dict[str, SessionEntry] = {}
    staged: dict[str, AgentMessage] = {}
    for row in rows:
        if row.stored:
            stored[row.id] = entry_of_row(row)
        else:
            staged[row.id] = _message.validate_python(row.payload)
    return Found(checked=frozenset(stored_ids), stored=stored, staged=staged)


class FinishedReplies:
    """Finished assistant replies this process staged, by entry id: what a tool call
    reads for its arguments right after the model activity staged them, without reading
    and parsing the whole message again.

    Only a finished reply goes in, once its transaction committed, and a finished reply
    is final: a later attempt of its model activity returns it instead of asking the
    model again, so nothing stages another message at its id. Two different messages put
    at one id (two attempts of one activity racing in this process) drop the id. A miss
    (another process staged it, or it was evicted) reads the store, as before.
    """

    def __init__(self, capacity: int = 256) -> None:
        # Replies can be long; tool calls read theirs within moments of the staging.
        self._capacity = capacity
        self._items: OrderedDict[str, AssistantMessage | None] = OrderedDict()

    def put(self, entry_id: str, message: AssistantMessage) -> None:
        if message.stop_reason in ("aborted", "error"):
            return  # not final: a later attempt replaces it
        if entry_id in self._items and self._items[entry_id] != message:
            self._items[entry_id] = None  # never trust this id again
        else:
            self._items[entry_id] = message
        self._items.move_to_end(entry_id)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, entry_id: str) -> AssistantMessage | None:
        return self._items.get(entry_id)
