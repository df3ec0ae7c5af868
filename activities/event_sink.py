"""Run events from inside an activity: written in the background, deltas merged.

Streaming produces many small deltas; writing each in its own transaction, on the
activity's own path, would cost more than the model call. The sink queues events in
memory, and a background task writes what is queued at most once per `interval`
seconds: at once if the last write is that long ago (a delta after a pause reaches
readers without delay), else when the interval is up; never sooner than `interval` after
the sink opened (a quick tool's events all go with its result). It sleeps while nothing
is queued: an activity waiting a second for its model's first token costs no wake-ups.
`close` writes the rest (with the message the activity produced staged in the same
transaction: the events saying it ended and the message itself are stored together;
and a read the activity needs next, which saves it a transaction of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from pydantic import BaseModel
from sqlalchemy.exc import InterfaceError, OperationalError

from duragent.activities.store_retry import with_store_retries
from duragent.domain.events import MessageUpdate
from duragent.domain.messages import AgentMessage
from duragent.store import events, staging
from duragent.store.db import Database
from duragent.store.statements import Tx

Staged = tuple[str, AgentMessage]
"""(entry id, message): what an activity produced, staged for the turn's save point."""


class EventSink:
    def __init__(
        self, db: Database, session_id: str, run_id: str, *, interval: float = 0.05
    ) -> None:
        self._db = db
        self._session_id = session_id
        self._run_id = run_id
        self._interval = interval
        self._pending: list[BaseModel] = []
        self._queued = asyncio.Event()
        """Set while events are queued, or once closing."""
        self._closing = asyncio.Event()
        self._written_at = time.monotonic()
        """When the last batch was written (at first: when the sink opened)."""
        self._writer: asyncio.Task[None] | None = None

    def add(self, event: BaseModel) -> None:
        last = self._pending[-1] if self._pending else None
        if (
            isinstance(event, MessageUpdate)
            and isinstance(last, MessageUpdate)
            and (last.entry_id, last.content_index, last.kind, last.attempt)
            == (event.entry_id, event.content_index, event.kind, event.attempt)
        ):
            self._pending[-1] = last.model_copy(update={"delta": last.delta + event.delta})
        else:
            self._pending.append(event)
        self._queued.set()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_periodically())

    async def close(
        self, stage: Staged | None = None, also: Callable[[Tx], None] | None = None
    ) -> AgentMessage | None:
        """Write everything still queued, and stage `stage` in the same transaction,
        then run `also` in it; return the message staged for its entry
        (`store.staging.stage_message`)."""
        self._closing.set()
        self._queued.set()
        if self._writer is not None:
            await self._writer
            self._writer = None
        batch, self._pending = self._pending, []
        if batch or stage or also:
            return await with_store_retries(
                lambda: self._write(batch, stage, also), what="writing run events"
            )
        return None

    async def _write_periodically(self) -> None:
        while True:
            await self._queued.wait()
            pause = self._written_at + self._interval - time.monotonic()
            if pause > 0:  # a batch gathers until the interval is up (close writes at once)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), pause)
            if self._closing.is_set():
                return
            batch, self._pending = self._pending, []
            self._queued.clear()
            self._written_at = time.monotonic()
            try:
                await asyncio.to_thread(self._write, batch, None)
            except (OperationalError, InterfaceError):
                # The store is busy: keep the events for the next write.
                self._pending = [*batch, *self._pending]
                self._queued.set()

    def _write(
        self,
        batch: list[BaseModel],
        stage: Staged | None,
        also: Callable[[Tx], None] | None = None,
    ) -> AgentMessage | None:
        if stage is None and also is None:  # one statement on PostgreSQL: no transaction
            with self._db.one_statement() as db:
                events.append_events(db, self._session_id, self._run_id, batch)
            return None
        staged = None
        with self._db.statements() as db:
            if stage is not None:
                entry_id, message = stage
                staged = staging.stage_message(
                    db,
                    entry_id=entry_id,
                    session_id=self._session_id,
                    run_id=self._run_id,
                    message=message,
                )
            events.append_events(db, self._session_id, self._run_id, batch)
            if also is not None:
                also(db)
        return staged
