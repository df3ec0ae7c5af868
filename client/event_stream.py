"""A session's run events, read after a cursor and followed as they are stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from duragent.client.session_reads import SessionReads
from duragent.store.records import StoredEvent

EVENT_POLL_S = 0.05


class EventStream(SessionReads):
    """Read and follow run events (from the store: workers are other processes)."""

    async def events(
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
        been yielded.
        """
        await asyncio.to_thread(self.get_session, session_id)
        async for batch in self.event_batches(session_id, after=after):
            for event in batch:
                if run_id is None or event.run_id == run_id:
                    yield event
                    if follow and event.type == "agent_end":
                        return
            if not batch and not follow:
                return

    async def event_batches(
        self, session_id: str, *, after: int = 0, poll_s: float = EVENT_POLL_S
    ) -> AsyncIterator[list[StoredEvent]]:
        """Every read of the session's events after the cursor `after`, without end: the
        events stored since the last read, or an empty list when there were none (then the
        next read is `poll_s` later). The empty reads are the caller's chance to act on a
        quiet session (a stream's keep-alive); the store is read off the event loop."""
        cursor = after
        while True:
            batch = await asyncio.to_thread(self.read_events, session_id, after=cursor)
            yield batch
            if batch:
                cursor = batch[-1].seq
            else:
                await asyncio.sleep(poll_s)
