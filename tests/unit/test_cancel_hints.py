"""Cancel hints through the store (`activities.cancel_hints`): a hint one process
publishes reaches a call running in another, read in one query per tick; a process
reads no hint of its own, and none while no call runs here."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from duragent.activities.cancel_hints import CancelHints
from duragent.activities.heartbeat import CallKey, HeartbeatPace
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
    writer, reader = CancelHints(db, writer_pace), CancelHints(db, reader_pace)
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
