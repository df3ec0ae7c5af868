"""Cancel hints between worker processes (`activities.cancel_hints`): a hint one process
publishes reaches a call running in another, and never the publisher's own calls. On
SQLite through the store (read in one query per tick, and none while no call runs
here); on PostgreSQL by `NOTIFY` to a listening connection, with no row written."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from postgres_server import new_database
from psycopg.conninfo import conninfo_to_dict
from pydantic import ValidationError
from sqlalchemy import make_url, text

from duragent.activities.cancel_hints import (
    NotifiedCancelHints,
    PolledCancelHints,
    channel_for,
    listen_conninfo,
)
from duragent.activities.heartbeat import CallKey, HeartbeatPace
from duragent.settings import Settings
from duragent.store import cancel_hints
from duragent.store.db import Database

KEY: CallKey = ("session-1", "run-1", "turn-1-tool-a")


class Recording(HeartbeatPace):
    """A pace that runs one call (`KEY`) and records the hints it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.hinted: list[CallKey] = []
        self.got = threading.Event()

    def running(self) -> bool:
        return True

    def hint_cancel(self, key: CallKey) -> bool:
        self.hinted.append(key)
        self.got.set()
        return key == KEY


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'store.db'}")


def test_a_hint_reaches_the_other_process_and_not_its_own(db: Database) -> None:
    writer_pace, reader_pace = Recording(), Recording()
    writer, reader = PolledCancelHints(db, writer_pace), PolledCancelHints(db, reader_pace)
    with db.transaction() as session:  # a hint from before the reader started
        cancel_hints.add_hints(session, [("old", "run", "x")], "elsewhere", 0)
    reader.start()
    writer.start()
    try:
        writer.publish(KEY)
        assert reader_pace.got.wait(timeout=10)
    finally:
        writer.stop()
        reader.stop()
    assert KEY in reader_pace.hinted
    assert ("old", "run", "x") not in reader_pace.hinted
    assert writer_pace.hinted == []


def test_old_hints_are_pruned(db: Database) -> None:
    with db.transaction() as session:
        cancel_hints.add_hints(session, [KEY], "a", 1_000)
        cancel_hints.add_hints(session, [KEY], "a", 5_000)
        cancel_hints.prune(session, 2_000)
        assert [h[1:] for h in cancel_hints.hints_after(session, 0, "b")] == [KEY]
        assert cancel_hints.hints_after(session, 0, "a") == []


def test_sqlite_keeps_the_poll(db: Database) -> None:
    assert isinstance(channel_for(db), PolledCancelHints)


def test_a_hint_on_postgresql_is_a_notify_and_writes_no_row(postgres_server: str) -> None:
    db = Database(new_database(postgres_server))
    writer_pace, reader_pace = Recording(), Recording()
    writer, reader = channel_for(db, None, writer_pace), channel_for(db, db.url, reader_pace)
    assert isinstance(writer, NotifiedCancelHints) and isinstance(reader, NotifiedCancelHints)
    reader.start()
    writer.start()
    try:
        assert reader.listening.wait(timeout=10) and writer.listening.wait(timeout=10)
        writer.publish(KEY)
        assert reader_pace.got.wait(timeout=10)
    finally:
        writer.stop()
        reader.stop()
    assert reader_pace.hinted == [KEY]
    assert writer_pace.hinted == []  # its own notification comes back to it: ignored
    with db.transaction() as session:
        assert session.scalar(text("SELECT count(*) FROM cancel_hints")) == 0
    db.dispose()


def test_the_listen_url_becomes_a_libpq_conninfo() -> None:
    url = (
        "postgresql+psycopg://us%40er:p%40ss%3Aw%20'x@db.example:6432/app"
        "?sslmode=require&application_name=fleet&prepare_threshold=0"
    )
    params = conninfo_to_dict(listen_conninfo(url))
    assert params["user"] == "us@er"
    assert params["password"] == "p@ss:w 'x"
    assert (params["host"], params["port"], params["dbname"]) == ("db.example", "6432", "app")
    assert params["sslmode"] == "require"
    assert params["application_name"] == "fleet"  # the URL's own name wins over ours
    assert "prepare_threshold" not in params  # psycopg's, not libpq's: no use to LISTEN
    assert params["keepalives"] == "1"  # a silently dropped connection is noticed
    socket = conninfo_to_dict(listen_conninfo("postgresql:///app?host=/run/postgresql"))
    assert (socket["host"], socket["dbname"]) == ("/run/postgresql", "app")
    assert socket["application_name"] == "duragent-cancel-hints"
    hosts = conninfo_to_dict(listen_conninfo("postgresql+psycopg://u@/db?host=a:5432&host=b:5433"))
    assert (hosts["host"], hosts["port"]) == ("a,b", "5432,5433")


def test_a_listen_url_that_is_not_postgresql_is_refused() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        listen_conninfo("sqlite:///x.db")
    with pytest.raises(ValueError, match="nonsense_option"):
        listen_conninfo("postgresql+psycopg://u@h/db?nonsense_option=1")


def test_the_listen_url_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURAGENT_DATABASE_LISTEN_URL", raising=False)
    store = "postgresql+psycopg://app@pgbouncer:6432/duragent"
    assert Settings.from_env(home=tmp_path, database_url=store).database_listen_url is None
    direct = "postgresql+psycopg://app@db:5432/duragent"
    monkeypatch.setenv("DURAGENT_DATABASE_LISTEN_URL", direct)
    assert Settings.from_env(home=tmp_path, database_url=store).database_listen_url == direct
    monkeypatch.setenv("DURAGENT_DATABASE_LISTEN_URL", "sqlite:///x.db")
    with pytest.raises(ValidationError) as refused:
        Settings.from_env(home=tmp_path, database_url=store)
    (error,) = refused.value.errors()
    assert error["loc"] == ("database_listen_url",)
    assert "not a PostgreSQL URL" in error["msg"]


def test_the_listen_url_defaults_to_the_stores(postgres_server: str, tmp_path: Path) -> None:
    """None: the channel listens on the store's own database (a notification reaches only
    the listeners of the database it was sent in)."""
    db = Database(new_database(postgres_server))
    try:
        channel = channel_for(db)
        assert isinstance(channel, NotifiedCancelHints)
        assert conninfo_to_dict(channel.conninfo)["dbname"] == make_url(db.url).database
    finally:
        db.dispose()
