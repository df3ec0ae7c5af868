"""The session tree: append entries, walk a path from a leaf to the root."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import CTE, BindParameter, Row, bindparam, literal, select
from sqlalchemy.orm import Session

from duragent.domain.entries import (
    CONFIG_ENTRIES,
    CompactionEntry,
    MessageEntry,
    SessionEntry,
    parse_entry,
)
from duragent.domain.messages import AssistantMessage, text_of
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
    """A path's ids, and where on it the entries that shape a context are."""

    ids: tuple[str, ...]
    config_at: tuple[int, ...]
    """Positions of the config entries (model, thinking level, active tools)."""
    compaction_at: int | None
    """Position of the latest compaction."""

    @classmethod
    def of(cls, entries: Sequence[SessionEntry], base: PathView | None = None) -> PathView:
        """The view of `base`'s path (or of none) followed by `entries`."""
        offset = len(base.ids) if base else 0
        config_at = tuple(
            offset + i for i, e in enumerate(entries) if isinstance(e, CONFIG_ENTRIES)
        )
        compactions = [i for i, e in enumerate(entries) if isinstance(e, CompactionEntry)]
        return cls(
            ids=(base.ids if base else ()) + tuple(e.id for e in entries),
            config_at=(base.config_at if base else ()) + config_at,
            compaction_at=offset + compactions[-1]
            if compactions
            else (base.compaction_at if base else None),
        )


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
        elif chain and (base := self._paths.pop(parent_id)) is not None:
            # The leaf moved on: the parent's view is dropped, so a session holds one view
            # (its ids grow with the session; 256 of them would).
            self.remember_path(PathView.of(chain, base))


def _path(leaf_id: str | BindParameter[str]) -> CTE:
    """The path from `leaf_id` up to the root as (id, depth), by walking parent links."""
    table = EntryRow.__table__
    path = (
        select(table.c.id, table.c.parent_id, literal(0).label("depth"))
        .where(table.c.id == leaf_id)
        .cte("path", recursive=True)
    )
    parent = table.alias("parent")
    return path.union_all(
        select(parent.c.id, parent.c.parent_id, path.c.depth + 1).join(
            path, parent.c.id == path.c.parent_id
        )
    )


_PATH = _path(bindparam("leaf_id"))
_PATH_IDS = select(_PATH.c.id).order_by(_PATH.c.depth.desc())
"""Built once: each session's first turn in a worker reads its path."""


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
    if view is not None:
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
    types = [cls.model_fields["type"].default for cls in CONFIG_ENTRIES]
    rows = db.scalars(
        select(EntryRow)
        .join(path, EntryRow.id == path.c.id)
        .where(EntryRow.type.in_(types))
        .order_by(path.c.depth.desc())
    )
    return [entry_of_row(row) for row in rows]


def load_context_path(db: Session, leaf_id: str | None, cache: EntryCache) -> list[SessionEntry]:
    """What buildContext needs of the path to `leaf_id`: its config entries, and all from
    the latest compaction's first kept entry on. It gives the same context and config as
    the whole path, in time that grows with the context, not with the session."""
    if leaf_id is None:
        return []
    view = cache.path(leaf_id)
    if view is None:
        load_path(db, leaf_id, cache)
        view = cache.path(leaf_id)
        assert view is not None
    start = 0
    if view.compaction_at is not None:
        (compaction,) = _read(db, [view.ids[view.compaction_at]], cache)
        assert isinstance(compaction, CompactionEntry)
        start = view.compaction_at  # buildContext keeps nothing before an unknown entry
        for i in range(view.compaction_at - 1, -1, -1):
            if view.ids[i] == compaction.first_kept_entry_id:
                start = i
                break
    config = [view.ids[i] for i in view.config_at if i < start]
    return _read(db, [*config, *view.ids[start:]], cache)


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
