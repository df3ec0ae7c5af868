"""The session tree: append entries, walk a path from a leaf to the root."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from sqlalchemy import CTE, BindParameter, Row, bindparam, literal, select
from sqlalchemy.orm import Session

from duragent.domain.agents import OUTPUT_KEY
from duragent.domain.entries import (
    CONFIG_ENTRIES,
    CompactionEntry,
    MessageEntry,
    SessionEntry,
    parse_entry,
)
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of
from duragent.store.statements import execute
from duragent.store.tables import EntryRow, table_of
from duragent.store.upsert import insert_ignore

_ENVELOPE = ("id", "parent_id", "type", "timestamp")
V = TypeVar("V")
_entries = table_of(EntryRow)
# Built once (see `store.statements`): what a turn reads of the tree.
_ENTRY_COLUMNS = (
    _entries.c.id,
    _entries.c.parent_id,
    _entries.c.type,
    _entries.c.timestamp,
    _entries.c.payload,
)
_BY_IDS = select(*_ENTRY_COLUMNS).where(_entries.c.id.in_(bindparam("ids", expanding=True)))
_IDS = select(_entries.c.id).where(_entries.c.id.in_(bindparam("ids", expanding=True)))


def _row_values(session_id: str, entry: SessionEntry, run_id: str | None) -> dict[str, object]:
    data = entry.model_dump(mode="json")
    return {
        "id": entry.id,
        "session_id": session_id,
        "parent_id": entry.parent_id,
        "type": entry.type,
        "timestamp": entry.timestamp,
        "run_id": run_id,
        "payload": {k: v for k, v in data.items() if k not in _ENVELOPE},
    }


def entry_of_row(row: EntryRow | Row[Any]) -> SessionEntry:
    """The entry a row of `session_entries` (or a select of its columns) holds."""
    return parse_entry(
        {
            "id": row.id,
            "parent_id": row.parent_id,
            "type": row.type,
            "timestamp": row.timestamp,
            **row.payload,
        }
    )


def insert_entries(
    db: Session, session_id: str, entries: Sequence[SessionEntry], *, run_id: str | None = None
) -> None:
    """Append entries; an entry whose id is already stored is skipped (idempotent retries)."""
    insert_ignore(
        db,
        table_of(EntryRow),
        [_row_values(session_id, e, run_id) for e in entries],
        conflict=["id"],
    )


def insert_new_entries(
    db: Session, session_id: str, entries: Sequence[SessionEntry], *, run_id: str | None = None
) -> None:
    """Add entries that must all be new: an id already stored is an `IntegrityError`
    (which ends the transaction), never skipped."""
    if entries:
        db.execute(
            table_of(EntryRow).insert(), [_row_values(session_id, e, run_id) for e in entries]
        )


def existing_ids(db: Session, ids: Sequence[str]) -> set[str]:
    if not ids:
        return set()
    return set(execute(db, _IDS, {"ids": list(ids)}).scalars())


def get_entry(db: Session, entry_id: str) -> SessionEntry | None:
    row = execute(db, _BY_IDS, {"ids": [entry_id]}).first()
    return entry_of_row(row) if row else None


@dataclass(frozen=True)
class PathView:
    """What a context needs of the path from the root to a leaf, and no more: the ids
    from where the context starts (the latest compaction's first kept entry, or the root
    when no compaction is on the path) to the leaf, and the ids of the config entries
    before that. What comes before the start never reaches a context again (a later
    compaction keeps only from its own context: `domain.compaction.plan_compaction`), so
    a view, and the work of extending it turn after turn, stay the size of a context
    however long the session runs."""

    ids: tuple[str, ...]
    """From the context's start to the leaf."""
    config_at: tuple[int, ...] = ()
    """Positions in `ids` of the config entries (model, thinking level, active tools,
    approval policy)."""
    config_before: tuple[str, ...] = ()
    """The config entries before `ids`, root first."""
    whole: bool = True
    """`ids` starts at the root."""

    @classmethod
    def of(cls, entries: Sequence[SessionEntry]) -> PathView:
        """The view of the path `entries` (root to leaf)."""
        view = _EMPTY.extended(entries)
        assert view is not None  # a whole path always knows where its context starts
        return view

    def extended(self, entries: Sequence[SessionEntry]) -> PathView | None:
        """The view of this path followed by `entries`; None when one of them is a
        compaction that keeps from an entry before what this view holds (none that this
        store plans does: the caller reads the path anew)."""
        offset = len(self.ids)
        view = replace(
            self,
            ids=self.ids + tuple(e.id for e in entries),
            config_at=self.config_at
            + tuple(offset + i for i, e in enumerate(entries) if isinstance(e, CONFIG_ENTRIES)),
        )
        for i in range(len(entries) - 1, -1, -1):
            if isinstance(compaction := entries[i], CompactionEntry):
                return view.compacted(compaction, offset + i)
        return view

    def compacted(self, compaction: CompactionEntry, at: int) -> PathView | None:
        """This view starting where the context does with the compaction at position
        `at` (the latest on the path): at its first kept entry, or at the compaction
        itself when that entry is not on the path (buildContext keeps nothing then)."""
        start = next(
            (i for i in range(at - 1, -1, -1) if self.ids[i] == compaction.first_kept_entry_id),
            None,
        )
        if start is None and not self.whole:
            return None  # it may be in the part this view no longer holds
        start = at if start is None else start
        return PathView(
            ids=self.ids[start:],
            config_at=tuple(i - start for i in self.config_at if i >= start),
            config_before=self.config_before
            + tuple(self.ids[i] for i in self.config_at if i < start),
            whole=self.whole and start == 0,
        )

    def context_ids(self) -> list[str]:
        """The ids buildContext needs: the config entries before the context, then it."""
        return [*self.config_before, *self.ids]


_EMPTY = PathView(ids=())


class _Lru(Generic[V]):
    """At most `capacity` values by key; the least recently used goes first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def pop(self, key: str) -> V | None:
        return self._items.pop(key, None)


class EntryCache:
    """Parsed entries and known paths, for a worker that reads the same paths turn after
    turn.

    A stored entry never changes, and neither does the path from the root to it, so
    caching both is always safe. A turn's path is its previous path plus what the save
    point just appended (`extend`): in the steady state a model turn reads no entries.
    A context needs a few hundred entries; the capacity covers dozens of busy sessions
    and bounds the memory (entries hold whole tool outputs), however long they run.
    """

    def __init__(self, capacity: int = 10_000, paths: int = 256) -> None:
        self._entries: _Lru[SessionEntry] = _Lru(capacity)
        self._paths: _Lru[PathView] = _Lru(paths)

    def get(self, entry_id: str) -> SessionEntry | None:
        return self._entries.get(entry_id)

    def put(self, entry: SessionEntry) -> None:
        self._entries.put(entry.id, entry)

    def path(self, leaf_id: str) -> PathView | None:
        return self._paths.get(leaf_id)

    def remember_path(self, view: PathView) -> None:
        if view.ids:
            self._paths.put(view.ids[-1], view)

    def extend(self, parent_id: str | None, chain: Sequence[SessionEntry]) -> None:
        """Record entries just appended below `parent_id`, one after another."""
        for entry in chain:
            self.put(entry)
        if parent_id is None:
            self.remember_path(PathView.of(chain))
            return
        # The leaf moved on: the parent's view is dropped, so a session holds one view.
        base = self._paths.pop(parent_id) if chain else None
        view = base.extended(chain) if base is not None else None
        if view is not None:
            self.remember_path(view)


def _path(leaf_id: str | BindParameter[str]) -> CTE:
    """The path from `leaf_id` up to the root as (id, type, depth), by walking parent
    links."""
    table = EntryRow.__table__
    path = (
        select(table.c.id, table.c.parent_id, table.c.type, literal(0).label("depth"))
        .where(table.c.id == leaf_id)
        .cte("path", recursive=True)
    )
    parent = table.alias("parent")
    return path.union_all(
        select(parent.c.id, parent.c.parent_id, parent.c.type, path.c.depth + 1).join(
            path, parent.c.id == path.c.parent_id
        )
    )


_PATH = _path(bindparam("leaf_id"))
_PATH_IDS = select(_PATH.c.id).order_by(_PATH.c.depth.desc())
_PATH_TYPES = select(_PATH.c.id, _PATH.c.type).order_by(_PATH.c.depth.desc())
"""Built once: each session's first turn in a worker reads its path."""
_CONFIG_TYPES = frozenset(cls.model_fields["type"].default for cls in CONFIG_ENTRIES)
_COMPACTION_TYPE = CompactionEntry.model_fields["type"].default


def path_ids(db: Session, leaf_id: str) -> list[str]:
    """The ids from the root down to `leaf_id`."""
    return list(execute(db, _PATH_IDS, {"leaf_id": leaf_id}).scalars())


def load_path(
    db: Session, leaf_id: str | None, cache: EntryCache | None = None
) -> list[SessionEntry]:
    """The entries from the root down to `leaf_id` (empty for an empty session)."""
    if leaf_id is None:
        return []
    view = cache.path(leaf_id) if cache is not None else None
    if view is not None and view.whole:
        return _read(db, view.ids, cache)
    path = _read(db, path_ids(db, leaf_id), cache)
    if cache is not None:
        cache.remember_path(PathView.of(path))
    return path


def load_config_path(db: Session, leaf_id: str | None) -> list[SessionEntry]:
    """The config entries (model, thinking level, active tools) on the path to `leaf_id`,
    root first: all `derive_path_state` needs, without parsing a long path's messages."""
    if leaf_id is None:
        return []
    path = _path(leaf_id)
    rows = db.scalars(
        select(EntryRow)
        .join(path, EntryRow.id == path.c.id)
        .where(EntryRow.type.in_(_CONFIG_TYPES))
        .order_by(path.c.depth.desc())
    )
    return [entry_of_row(row) for row in rows]


def load_context_path(db: Session, leaf_id: str | None, cache: EntryCache) -> list[SessionEntry]:
    """What buildContext needs of the path to `leaf_id`: its config entries, and all from
    the latest compaction's first kept entry on. It gives the same context and config as
    the whole path, in time that grows with the context, not with the session: the
    worker's view of the path moves on with each save point (`EntryCache.extend`), and a
    path it does not know is walked for ids and types alone, its context then read."""
    if leaf_id is None:
        return []
    view = cache.path(leaf_id)
    if view is None:
        view = _context_view(db, leaf_id, cache)
        cache.remember_path(view)
    return _read(db, view.context_ids(), cache)


def _context_view(db: Session, leaf_id: str, cache: EntryCache) -> PathView:
    """The view of the path to `leaf_id`, walked in the store: every entry's id and type,
    the latest compaction's content alone (where its context starts)."""
    rows = execute(db, _PATH_TYPES, {"leaf_id": leaf_id}).all()
    view = PathView(
        ids=tuple(row.id for row in rows),
        config_at=tuple(i for i, row in enumerate(rows) if row.type in _CONFIG_TYPES),
    )
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].type == _COMPACTION_TYPE:
            (compaction,) = _read(db, [rows[i].id], cache)
            assert isinstance(compaction, CompactionEntry)
            compacted = view.compacted(compaction, i)
            assert compacted is not None  # a whole path knows where its context starts
            return compacted
    return view


def _read(db: Session, ids: Sequence[str], cache: EntryCache | None) -> list[SessionEntry]:
    """The entries with these ids, in this order: from the cache, else the database."""
    known = {i: e for i in ids if cache is not None and (e := cache.get(i)) is not None}
    missing = [i for i in ids if i not in known]
    for start in range(0, len(missing), _BATCH):
        rows = execute(db, _BY_IDS, {"ids": missing[start : start + _BATCH]})
        for row in rows:
            entry = entry_of_row(row)
            known[entry.id] = entry
            if cache is not None:
                cache.put(entry)
    return [known[i] for i in ids]


_BATCH = 500


def list_entries(db: Session, session_id: str) -> list[SessionEntry]:
    rows = db.scalars(
        select(EntryRow).where(EntryRow.session_id == session_id).order_by(EntryRow.seq)
    )
    return [entry_of_row(row) for row in rows]


def get_entries(db: Session, ids: Sequence[str]) -> list[SessionEntry]:
    if not ids:
        return []
    return [entry_of_row(row) for row in execute(db, _BY_IDS, {"ids": list(ids)})]


def belongs_to(db: Session, entry_id: str, session_id: str) -> bool:
    found = db.scalar(
        select(EntryRow.id).where(EntryRow.id == entry_id, EntryRow.session_id == session_id)
    )
    return found is not None


_RUN_MESSAGES_NEWEST_FIRST = (
    select(*_ENTRY_COLUMNS)
    .where(
        _entries.c.session_id == bindparam("session_id"),
        _entries.c.run_id == bindparam("run_id"),
        _entries.c.type == "message",
    )
    .order_by(_entries.c.seq.desc())
)


def final_text(db: Session, session_id: str, run_id: str) -> str:
    """The text of the run's last assistant message ("" when it has none): the answer a
    caller of a run wants, as the run's end reported it."""
    rows = execute(db, _RUN_MESSAGES_NEWEST_FIRST, {"session_id": session_id, "run_id": run_id})
    for row in rows:
        entry = entry_of_row(row)
        if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            return text_of(entry.message.content)
    return ""


def run_output(db: Session, session_id: str, run_id: str) -> Any:
    """The run's structured output (`domain.agents.OUTPUT_KEY` of its last accepted
    output call), in its JSON form; None when the run gave none."""
    rows = execute(db, _RUN_MESSAGES_NEWEST_FIRST, {"session_id": session_id, "run_id": run_id})
    for row in rows:
        entry = entry_of_row(row)
        if not isinstance(entry, MessageEntry) or not isinstance(entry.message, ToolResultMessage):
            continue
        details = entry.message.details or {}
        if not entry.message.is_error and OUTPUT_KEY in details:
            return details[OUTPUT_KEY]
    return None
