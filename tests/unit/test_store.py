"""The store: migrations match the tables, paths walk the tree, writes are idempotent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from postgres_server import new_database
from sqlalchemy import event, text
from support import BOTH_STORES

from duragent.domain.config import SessionConfig
from duragent.domain.context import build_context, derive_path_state
from duragent.domain.entries import (
    ActiveToolsChangeEntry,
    CompactionEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
)
from duragent.domain.events import TurnStart
from duragent.domain.messages import text_of, user_text
from duragent.store import display, entries, events, sessions
from duragent.store.append import append_below
from duragent.store.db import Database, alembic_config
from duragent.store.entries import EntryCache
from duragent.store.errors import SessionNotFound
from duragent.store.events import KeyedEvent
from duragent.store.tables import Base


@pytest.fixture
def store_url(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> str:
    """The URL of an empty database of the test's kind."""
    if database == "postgresql":
        return new_database(request.getfixturevalue("postgres_server"))
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def db(store_url: str) -> Iterator[Database]:
    """A migrated store of the test's kind, empty."""
    store = Database(store_url)
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
def test_an_event_for_a_session_not_stored_is_refused_and_stores_nothing(db: Database) -> None:
    with pytest.raises(SessionNotFound), db.one_statement() as tx:
        events.append_events(tx, "gone", "r", [TurnStart(turn=1)])
    with db.transaction() as tx:
        assert events.read_events(tx, "gone") == []


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
    # On SQLite a process's transactions take turns (`store.db.file_turns`): this read
    # waits for the writers' turns, up to `TURN_WAIT_S`; on PostgreSQL it reads between
    # them. Either way it must miss nothing.
    reader = threading.Thread(target=read_new)
    reader.start()
    reader.join(0.5)
    release.set()
    slow.join(10)
    fast.join(10)
    reader.join(10)
    read_new()
    assert sorted(seen) == [1, 2]


@BOTH_STORES
def test_each_session_numbers_its_messages_and_events_from_one(db: Database) -> None:
    """A cursor says nothing about other sessions: however busy one session is, the next
    one's first message and event are number 1. What a retried step writes again is
    skipped without breaking the order (it may leave a gap)."""
    with db.transaction() as tx:
        for session_id in ("busy", "new"):
            sessions.create_session(
                tx, session_id=session_id, workspace="/w", config=SessionConfig(model="m")
            )
    for turn in range(1, 41):
        with db.transaction() as tx:
            batch = [KeyedEvent(key=f"t{turn}", event=TurnStart(turn=turn)), TurnStart(turn=turn)]
            events.append_events(tx, "busy", "r", batch)
            if turn % 10 == 0:
                events.append_events(tx, "busy", "r", batch[:1])  # a retried step: stored once
            message = (f"m{turn}", user_text(f"turn {turn}", 0))
            display.append_display(tx, "busy", "r", [message])
            if turn % 10 == 0:
                display.append_display(tx, "busy", "r", [message])  # shown once, a gap left
    with db.transaction() as tx:
        events.append_events(tx, "new", "r2", [TurnStart(turn=1)])
        display.append_display(tx, "new", "r2", [("first", user_text("hello", 0))])
    with db.transaction() as tx:
        busy_events = events.read_events(tx, "busy", limit=1000)
        assert [e.payload["turn"] for e in busy_events] == [t for t in range(1, 41) for _ in "ab"]
        assert [e.seq for e in busy_events] == sorted({e.seq for e in busy_events})
        shown = display.list_display(tx, "busy")
        assert [m.id for m in shown] == [f"m{t}" for t in range(1, 41)]
        assert [m.seq for m in shown] == sorted({m.seq for m in shown})
        assert [e.seq for e in events.read_events(tx, "new")] == [1]
        assert [m.seq for m in display.list_display(tx, "new")] == [1]
        assert events.latest_seq(tx, "new") == 1
        assert events.latest_seq(tx, "busy") == busy_events[-1].seq


@BOTH_STORES
def test_the_migration_numbers_existing_rows_per_session_in_their_order(store_url: str) -> None:
    """A store written with one sequence across sessions: after the upgrade each
    session's rows are numbered from 1 in the order they were written, and new rows
    continue from there."""
    old = Database(store_url, run_migrations=False)
    with old.engine.begin() as connection:
        command.upgrade(alembic_config(connection), "0002")
    with old.engine.begin() as connection:
        for session_id in ("a", "b"):
            connection.execute(
                text(
                    "INSERT INTO sessions (id, workspace, config, created_at, updated_at)"
                    " VALUES (:id, '/w', :config, 0, 0)"
                ),
                {"id": session_id, "config": json.dumps(SessionConfig(model="m").model_dump())},
            )
        for n, session_id in enumerate("abbabab"):  # interleaved, as busy sessions write
            payload = json.dumps({"type": "turn_start", "turn": n})
            connection.execute(
                text(
                    "INSERT INTO run_events (session_id, type, payload, created_at)"
                    " VALUES (:s, 'turn_start', :p, 0)"
                ),
                {"s": session_id, "p": payload},
            )
            message = json.dumps(user_text(f"{session_id}{n}", 0).model_dump(mode="json"))
            connection.execute(
                text(
                    "INSERT INTO display_messages (id, session_id, role, payload, created_at)"
                    " VALUES (:id, :s, 'user', :p, 0)"
                ),
                {"id": f"{session_id}{n}", "s": session_id, "p": message},
            )
    old.dispose()
    db = Database(store_url)
    try:
        with db.transaction() as tx:
            assert [(e.seq, e.payload["turn"]) for e in events.read_events(tx, "a")] == [
                (1, 0),
                (2, 3),
                (3, 5),
            ]
            assert [(e.seq, e.payload["turn"]) for e in events.read_events(tx, "b")] == [
                (1, 1),
                (2, 2),
                (3, 4),
                (4, 6),
            ]
            assert [(m.seq, m.id) for m in display.list_display(tx, "b")] == [
                (1, "b1"),
                (2, "b2"),
                (3, "b4"),
                (4, "b6"),
            ]
            events.append_events(tx, "a", "r", [TurnStart(turn=9)])
            display.append_display(tx, "b", "r", [("b9", user_text("b9", 0))])
        with db.transaction() as tx:
            assert events.read_events(tx, "a", after=3)[0].seq == 4
            assert display.list_display(tx, "b", after=4)[0].seq == 5
            page, earlier = display.messages_before(tx, "b", None, limit=2)
            assert [m.id for m in page] == ["b6", "b9"] and earlier
        with db.engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
        with db.engine.begin() as connection:  # and back, keeping every row
            command.downgrade(alembic_config(connection), "0002")
        with db.engine.connect() as connection:
            counts = [
                connection.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
                for table in ("run_events", "display_messages")
            ]
        assert counts == [8, 8]
        with db.engine.begin() as connection:
            command.upgrade(alembic_config(connection), "head")
        with db.transaction() as tx:
            assert [e.seq for e in events.read_events(tx, "a")] == [1, 2, 3, 4]
    finally:
        db.dispose()


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


def test_what_a_worker_keeps_of_a_path_stays_the_size_of_its_context(db: Database) -> None:
    """A session of 1,000 turns compacted every 50: the worker's view of its path, moved
    on by each save point, holds the context (and the config entries before it), not the
    session; it reads the context the whole path gives, as does a worker that never saw
    the session (it walks ids and types, and reads only the context's entries)."""

    def message(entry_id: str) -> MessageEntry:
        return MessageEntry(
            id=entry_id, parent_id=None, timestamp=0, message=user_text(entry_id, 0)
        )

    root: list[SessionEntry] = [
        message("m0"),
        ModelChangeEntry(id="model", parent_id=None, timestamp=0, model="claude-x"),
    ]
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
    cache = EntryCache()
    leaf: str | None = None
    sizes: list[int] = []

    def save(items: list[SessionEntry]) -> None:  # as a save point appends below the leaf
        nonlocal leaf
        with db.transaction() as tx:
            leaf = append_below(tx, "s", leaf, items, run_id=None, cache=cache).leaf_id
        assert leaf is not None
        view = cache.path(leaf)  # what the next turn reads its context from
        assert view is not None
        sizes.append(len(view.ids))

    save(root)
    for turn in range(1, 1001):
        save([message(f"m{turn}")])
        if turn % 50 == 0:
            kept = f"m{turn - 10}"
            compaction = CompactionEntry(
                id=f"c{turn}",
                parent_id=None,
                timestamp=0,
                summary=f"S{turn}",
                first_kept_entry_id=kept,
            )
            save([compaction])
    assert max(sizes[200:]) <= 11 + 1 + 50  # kept, the compaction, the turns since
    defaults = SessionConfig(model="claude-default")
    with db.transaction() as tx:
        whole = build_context(entries.load_path(tx, leaf), defaults)
        assert build_context(entries.load_context_path(tx, leaf, cache), defaults) == whole
        cold = entries.load_context_path(tx, leaf, EntryCache())
    assert build_context(cold, defaults) == whole
    assert [e.id for e in cold][:3] == ["model", "m990", "m991"]
    assert whole.model == "claude-x" and len(whole.messages) == 1 + 11  # summary, kept


def test_a_compaction_keeping_from_before_the_view_reads_the_path_anew(db: Database) -> None:
    """A compaction that keeps from before the previous one's kept part (a session
    imported from pi may hold one): the worker's view no longer holds that entry, so it
    reads the path from the store and builds the context the whole path gives."""

    def message(entry_id: str, parent: str | None) -> MessageEntry:
        return MessageEntry(
            id=entry_id, parent_id=parent, timestamp=0, message=user_text(entry_id, 0)
        )

    chain: list[SessionEntry] = [message("m0", None)]
    chain += [message(f"m{i}", f"m{i - 1}") for i in range(1, 20)]
    chain.append(
        CompactionEntry(
            id="c1", parent_id="m19", timestamp=0, summary="S1", first_kept_entry_id="m15"
        )
    )
    later: list[SessionEntry] = [
        message("m20", "c1"),
        CompactionEntry(
            id="c2", parent_id="m20", timestamp=0, summary="S2", first_kept_entry_id="m5"
        ),
    ]
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        entries.insert_entries(tx, "s", [*chain, *later])
    cache = EntryCache()
    defaults = SessionConfig(model="claude-default")
    with db.transaction() as tx:
        entries.load_context_path(tx, "c1", cache)
        cache.extend("c1", later)
        whole = build_context(entries.load_path(tx, "c2"), defaults)
        assert build_context(entries.load_context_path(tx, "c2", cache), defaults) == whole
    assert len(whole.messages) == 1 + 15 + 1 + 1  # S2, m5..m19, S1, m20


@BOTH_STORES
def test_the_config_path_gives_the_config_of_the_whole_path_and_skips_other_branches(
    db: Database,
) -> None:
    def message(entry_id: str, parent: str | None) -> MessageEntry:
        return MessageEntry(
            id=entry_id, parent_id=parent, timestamp=0, message=user_text(entry_id, 0)
        )

    tree: list[SessionEntry] = [
        message("m0", None),
        ModelChangeEntry(id="model", parent_id="m0", timestamp=0, model="claude-x"),
        message("m1", "model"),
        ActiveToolsChangeEntry(id="tools", parent_id="m1", timestamp=0, active_tools=["read"]),
        message("m2", "tools"),
        # another branch from m1, with a model change of its own
        ModelChangeEntry(id="other-model", parent_id="m1", timestamp=0, model="claude-y"),
        message("m3", "other-model"),
    ]
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        entries.insert_entries(tx, "s", tree)
    defaults = SessionConfig(model="claude-default")
    with db.transaction() as tx:
        for leaf, ids in (("m2", ["model", "tools"]), ("m3", ["model", "other-model"])):
            config_path = entries.load_config_path(tx, leaf)
            assert [e.id for e in config_path] == ids
            whole = entries.load_path(tx, leaf)
            assert derive_path_state(config_path, defaults) == derive_path_state(whole, defaults)
        assert entries.load_config_path(tx, None) == []


def test_a_process_writers_to_one_sqlite_file_take_turns(tmp_path: Path) -> None:
    """Threads of one process writing to one SQLite file (through two engines, as a
    worker's lease keeper does) never wait in SQLite's busy loop: with its timeout at
    zero, every write still lands, each transaction whole."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    stores = [Database(url), Database(url, run_migrations=False, pool_size=1)]
    for store in stores:
        event.listen(store.engine, "connect", _no_busy_wait)
    with stores[0].transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
    failures: list[BaseException] = []

    def write(store: Database, turn: int) -> None:
        try:
            for _ in range(20):
                with store.transaction() as tx:
                    events.append_events(tx, "s", "r", [TurnStart(turn=turn)])
                    events.append_events(tx, "s", "r", [TurnStart(turn=turn)])
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(stores[i % 2], i)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    with stores[0].transaction() as tx:
        stored = events.read_events(tx, "s", after=0)
    assert [e.seq for e in stored] == list(range(1, 8 * 20 * 2 + 1))
    # Each transaction's two events are adjacent: no other writer came between them.
    assert all(a.payload == b.payload for a, b in zip(stored[::2], stored[1::2], strict=True))
    for store in stores:
        store.dispose()


def _no_busy_wait(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA busy_timeout=0")
