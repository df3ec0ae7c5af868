"""The store: migrations match the tables, paths walk the tree, writes are idempotent."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from domain.config import SessionConfig
from domain.entries import MessageEntry
from domain.events import TurnStart
from domain.messages import user_text
from store import entries, events, sessions
from store.db import Database
from store.entries import EntryCache
from store.events import KeyedEvent
from store.tables import Base


def make_db(tmp_path: Path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'store.db'}")


def test_migrations_create_exactly_the_mapped_schema(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with db.engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    Database(db.url)  # migrating again is a no-op


def test_paths_follow_parents_and_inserts_are_idempotent(tmp_path: Path) -> None:
    db = make_db(tmp_path)

    def entry(entry_id: str, parent: str | None) -> MessageEntry:
        return MessageEntry(
            id=entry_id, parent_id=parent, timestamp=0, message=user_text(entry_id, 0)
        )

    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        chain = [entry("a", None), entry("b", "a"), entry("c", "b"), entry("x", "a")]
        entries.insert_entries(tx, "s", chain)
        entries.insert_entries(tx, "s", chain)  # a retried step
    cache = EntryCache()
    with db.transaction() as tx:
        assert [e.id for e in entries.load_path(tx, "c", cache)] == ["a", "b", "c"]
        assert [e.id for e in entries.load_path(tx, "x", cache)] == ["a", "x"]
        assert len(entries.list_entries(tx, "s")) == 4


def test_keyed_events_are_stored_once_and_read_from_a_cursor(tmp_path: Path) -> None:
    db = make_db(tmp_path)
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        for _ in range(2):
            events.append_events(
                tx, "s", "r", [KeyedEvent(key="k1", event=TurnStart(turn=1)), TurnStart(turn=2)]
            )
    with db.transaction() as tx:
        stored = events.read_events(tx, "s")
        assert [e.payload["turn"] for e in stored] == [1, 2, 2]
        assert [e.payload["turn"] for e in events.read_events(tx, "s", after=stored[0].seq)] == [
            2,
            2,
        ]
