"""What a chat view shows of a session (`client.display`): its display messages, paged
after or before a cursor, and a page of messages and run events read together."""

from __future__ import annotations

from dataclasses import dataclass

from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.domain.cost import SessionCosts, session_costs
from duragent.store import display, events, input_queue, runs
from duragent.store.records import DisplayMessage, QueueItem, RunRecord, StoredEvent


@dataclass(frozen=True)
class SessionPage:
    """What a page shows of a session, read in one transaction (so its parts agree): a
    page of display messages, one of run events, the latest run and the pending input."""

    messages: list[DisplayMessage]
    messages_more: bool
    """More messages follow the page (only when read after a cursor)."""
    messages_earlier: bool
    """Messages come before the page."""
    events: list[StoredEvent]
    events_more: bool
    latest_run: RunRecord | None
    input_queue: list[QueueItem]
    costs: SessionCosts
    """The session's cost and its runs' (`latest_run`'s among them)."""


class SyncDisplay(SyncPart):
    """A session's chat view, from the store (`client.sync.display`)."""

    def messages(self, session_id: str, *, after: int = 0) -> list[DisplayMessage]:
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return display.list_display(db, session_id, after=after)

    def messages_before(
        self, session_id: str, before: int | None, *, limit: int
    ) -> tuple[list[DisplayMessage], bool]:
        """The page of display messages just before the cursor `before` (the newest page
        without one), oldest first, bounded in count and bytes; and whether earlier
        messages exist."""
        with self._client.db.transaction() as db:
            return display.messages_before(db, session_id, before, limit=limit)

    def page(
        self,
        session_id: str,
        *,
        messages_after: int | None,
        messages_limit: int,
        events_after: int | None,
        events_limit: int,
    ) -> SessionPage:
        """A page of the session's display messages and one of its run events, each
        bounded in count and bytes: without a cursor the newest items, with one the items
        after it; with the latest run and the pending input queue."""
        with self._client.db.transaction() as db:
            if messages_after is None:
                shown, earlier = display.messages_before(db, session_id, None, limit=messages_limit)
                more = False
            else:
                shown, more = display.messages_after(
                    db, session_id, messages_after, limit=messages_limit
                )
                earlier = display.any_before(
                    db, session_id, shown[0].seq if shown else messages_after + 1
                )
            activity, events_more = events.events_page(
                db, session_id, after=events_after, limit=events_limit
            )
            latest = runs.list_runs(db, session_id, limit=1)
            pending = input_queue.list_items(db, session_id, status="pending")
            by_run = self._client.usage_tally.read(db, session_id)
        return SessionPage(
            messages=shown,
            messages_more=more,
            messages_earlier=earlier,
            events=activity,
            events_more=events_more,
            latest_run=latest[0] if latest else None,
            input_queue=pending,
            costs=session_costs(by_run, self._client.prices),
        )


class Display(StoreBackedPart[SyncDisplay]):
    """A session's chat view, from the store."""

    messages = in_thread(SyncDisplay.messages)
    messages_before = in_thread(SyncDisplay.messages_before)
    page = in_thread(SyncDisplay.page)
