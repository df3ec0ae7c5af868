"""The store: migrations match the tables, paths walk the tree, writes are idempotent."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from postgres_server import new_database
from support import BOTH_STORES

from domain.config import SessionConfig
from domain.context import build_context
from domain.entries import (
    ActiveToolsChangeEntry,
    CompactionEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
)
from domain.events import TurnStart
from domain.messages import text_of, user_text
from store import entries, events, sessions
from store.db import Database
from store.entries import EntryCache
from store.events import KeyedEvent
from store.tables import Base


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> Iterator[Database]:
    """A migrated store of the test's kind, empty."""
    if database == "postgresql":
        url = new_database(request.getfixturevalue("postgres_server"))
    else:
        url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Database(url)
    yield store
    store.dispose()


@BOTH_STORES
def test_migrations_create_exactly_the_mapped_schema(db: Database) -> None:
    with db.engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    Database(db.url)  # migrating again is a no-op


@BOTH_STORES
def test_paths_follow_parents_and_inserts_are_idempotent(db: Database) -> None:

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


@BOTH_STORES
def test_keyed_events_are_stored_once_and_read_from_a_cursor(db: Database) -> None:
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


@BOTH_STORES
def test_a_reader_following_the_cursor_misses_no_event_of_a_slower_writer(db: Database) -> None:
    """Two writers of one session: the first to insert commits last. A client reading
    `seq > cursor` in between must still get both (PostgreSQL hands out `seq` at insert)."""
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
    seen: list[int] = []
    cursor = 0

    def read_new() -> None:
        nonlocal cursor
        with db.transaction() as tx:
            for event in events.read_events(tx, "s", after=cursor):
                seen.append(event.payload["turn"])
                cursor = event.seq

    inserted, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with db.transaction() as tx:
            events.append_events(tx, "s", "r", [TurnStart(turn=1)])
            inserted.set()
            release.wait(10)

    def fast_writer() -> None:
        with db.transaction() as tx:
            events.append_events(tx, "s", "r", [TurnStart(turn=2)])

    slow = threading.Thread(target=slow_writer)
    slow.start()
    assert inserted.wait(10)
    fast = threading.Thread(target=fast_writer)
    fast.start()
    fast.join(0.5)  # waits for the slow writer, or commits if the store let it
    read_new()
    release.set()
    slow.join(10)
    fast.join(10)
    read_new()
    assert sorted(seen) == [1, 2]


def test_the_context_path_builds_the_same_context_as_the_whole_path(db: Database) -> None:
    def message(entry_id: str, parent: str | None) -> MessageEntry:
        return MessageEntry(
            id=entry_id, parent_id=parent, timestamp=0, message=user_text(entry_id, 0)
        )

    chain: list[SessionEntry] = [message("m0", None)]
    chain.append(ModelChangeEntry(id="model", parent_id="m0", timestamp=0, model="claude-x"))
    chain += [message(f"m{i}", chain[-1].id if i > 1 else "model") for i in range(1, 40)]
    chain.append(
        CompactionEntry(
            id="c1", parent_id="m39", timestamp=0, summary="S1", first_kept_entry_id="m30"
        )
    )
    chain.append(ActiveToolsChangeEntry(id="tools", parent_id="c1", timestamp=0, active_tools=[]))
    chain.append(message("m40", "tools"))
    later: list[SessionEntry] = [
        message("m41", "m40"),
        CompactionEntry(
            id="c2", parent_id="m41", timestamp=0, summary="S2", first_kept_entry_id="m40"
        ),
        message("m42", "c2"),
    ]
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        entries.insert_entries(tx, "s", [*chain, *later])
    defaults = SessionConfig(model="claude-default")
    for leaf, cache_from in (("m40", None), ("m42", "m40")):
        cache = EntryCache()
        with db.transaction() as tx:
            if cache_from:  # the cache learnt the later entries from a save point
                entries.load_path(tx, cache_from, cache)
                cache.extend(cache_from, later)
            whole = build_context(entries.load_path(tx, leaf), defaults)
            reduced_path = entries.load_context_path(tx, leaf, cache)
        assert build_context(reduced_path, defaults) == whole
        assert len(reduced_path) < 15  # config entries and the kept context only
    assert whole.model == "claude-x" and whole.active_tools == []
    assert [text_of(m.content).rsplit("\n", 1)[-1] for m in whole.messages] == [
        "S2",
        "m40",
        "m41",
        "m42",
    ]
