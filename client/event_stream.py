"""A session's run events (`client.events`), read after a cursor and followed as they are
stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.store import events
from duragent.store.records import StoredEvent

if TYPE_CHECKING:
    from duragent.client.api import DuragentClient

EVENT_POLL_S = 0.05


class SyncEvents(SyncPart):
    """A session's stored run events (`client.sync.events`)."""

    def read(self, session_id: str, *, after: int = 0) -> list[StoredEvent]:
        """The next batch of the session's run events after the cursor `after`."""
        with self._client.db.transaction() as db:
            return events.read_events(db, session_id, after=after)

    def cursor(self, session_id: str) -> int:
        """The session's newest event seq (numbered per session from 1): follow from here
        to see only what comes next."""
        with self._client.db.transaction() as db:
            return events.latest_seq(db, session_id)


class EventStream(StoreBackedPart[SyncEvents]):
    """Read and follow run events (from the store: workers are other processes)."""

    def __init__(self, client: DuragentClient, store: SyncEvents) -> None:
        super().__init__(client, store)
        self._ended = False

    read = in_thread(SyncEvents.read)
    cursor = in_thread(SyncEvents.cursor)

    def end_streams(self) -> None:
        """End every following of events, at its next read, and make later ones end at
        once: a server that stops ends its event streams (a page then reconnects to the
        next one from its last event id) instead of waiting for the clients that keep
        them open, which they do for as long as a run waits for a person."""
        self._ended = True

    async def stream(
        self,
        session_id: str,
        *,
        after: int = 0,
        run_id: str | None = None,
        follow: bool = True,
    ) -> AsyncIterator[StoredEvent]:
        """Run events after the cursor `after`, in order.

        Without `follow`, every event stored so far. With `follow`, keep waiting for new
        ones until `agent_end` of `run_id` (or of any run, when no run id is given) has
        been yielded, or `end_streams`.
        """
        await self._client.sessions.get(session_id)
        async for batch in self.batches(session_id, after=after):
            for event in batch:
                if run_id is None or event.run_id == run_id:
                    yield event
                    if follow and event.type == "agent_end":
                        return
            if not batch and not follow:
                return

    async def batches(
        self, session_id: str, *, after: int = 0, poll_s: float = EVENT_POLL_S
    ) -> AsyncIterator[list[StoredEvent]]:
        """Every read of the session's events after the cursor `after`, until
        `end_streams`: the events stored since the last read, or an empty list when there
        were none (then the next read is `poll_s` later). The empty reads are the caller's
        chance to act on a quiet session (a stream's keep-alive); the store is read off
        the event loop."""
        cursor = after
        while not self._ended:
            batch = await self.read(session_id, after=cursor)
            yield batch
            if batch:
                cursor = batch[-1].seq
            else:
                await asyncio.sleep(poll_s)
