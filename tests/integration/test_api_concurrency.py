"""A slow database call holds up its own request only: the API serves others meanwhile.

The store's calls are synchronous; run on the event loop, one that waits on the database
(a lock, a slow disk, a large read) would stall every request of the process. The slow
call here is real: PostgreSQL holds a write to the input queue behind a table lock taken
by another connection, which `pg_stat_activity` shows as waiting.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from support import ApiServer, Stack, eventually

LOCK_HELD_AT_MOST_S = 30.0
"""The lock is let go this late at the latest, so a stalled server cannot hang the run."""


class TableLock:
    """`LOCK TABLE` in a transaction of its own, on a thread of its own, until released."""

    def __init__(self, url: str, table: str) -> None:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self._table = table
        self.held = threading.Event()
        self.release = threading.Event()
        self.released = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        with psycopg.connect(self._dsn) as connection:
            # EXCLUSIVE: other connections may read the table but not write to it.
            connection.execute(f"LOCK TABLE {self._table} IN EXCLUSIVE MODE")
            self.held.set()
            self.release.wait(LOCK_HELD_AT_MOST_S)
        self.released.set()

    def writes_waiting(self) -> bool:
        """Whether another connection's statement is waiting for this lock."""
        with psycopg.connect(self._dsn) as connection:
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND query ILIKE %s",
                (f"%{self._table}%",),
            ).fetchone()
        return bool(row and row[0])

    def __enter__(self) -> TableLock:
        self._thread.start()
        if not self.held.wait(30):
            raise AssertionError("the table lock was not taken")
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self._thread.join()


async def new_session(http: Any, name: str) -> str:
    created = await http.post("/api/sessions", json={"name": name})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_a_request_waiting_on_the_database_does_not_stall_another(
    stack: Stack, api: ApiServer
) -> None:
    async with api.client() as http:
        slow = await new_session(http, "waits on the database")
        other = await new_session(http, "read meanwhile")
        with TableLock(stack.settings.database_url, "input_queue") as lock:
            queued = asyncio.create_task(
                http.post(f"/api/sessions/{slow}/input-queue", json={"text": "later"})
            )
            # The write is in the database, waiting for the lock (not still on its way).
            await eventually(lambda: asyncio.to_thread(lock.writes_waiting))

            state = await http.get(f"/api/sessions/{other}/state")
            listed = await http.get("/api/sessions")

            assert state.status_code == 200, state.text
            assert state.json()["input_queue"] == []
            assert {s["name"] for s in listed.json()} == {"read meanwhile", "waits on the database"}
            assert not lock.released.is_set() and not queued.done()
        # Once the lock is gone, the waiting write goes through: nothing was lost.
        answer = await queued
        assert answer.status_code == 201, answer.text
        pending = await http.get(f"/api/sessions/{slow}/input-queue")
        assert [item["text"] for item in pending.json()] == ["later"]
