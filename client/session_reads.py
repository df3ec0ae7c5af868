"""Store-only reads of sessions: nothing here asks Temporal or a worker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from duragent.activities.resources import load_resources
from duragent.client.core import ClientCore
from duragent.client.errors import EntryNotInSession, QueueItemNotFound, SessionNotFound
from duragent.domain.cost import SessionCosts, session_costs
from duragent.domain.entries import SessionEntry, current_labels
from duragent.domain.resources import ResourceKind
from duragent.store import display, entries, events, input_queue, runs, sessions
from duragent.store.errors import SessionNotFound as StoreSessionNotFound
from duragent.store.metrics import StoreFigures, store_figures
from duragent.store.records import DisplayMessage, QueueItem, RunRecord, SessionRecord, StoredEvent


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


class SessionReads(ClientCore):
    """Reads answered from the store alone, so they work while no worker runs."""

    def store_figures(self) -> StoreFigures:
        """What the store says now (sessions, runs in progress by phase, input waiting,
        approvals waiting): the API's metrics, counted at each scrape."""
        with self.db.transaction() as db:
            return store_figures(db)

    def get_session(self, session_id: str) -> SessionRecord:
        with self.db.transaction() as db:
            try:
                return sessions.require_session(db, session_id)
            except StoreSessionNotFound as err:
                raise SessionNotFound(session_id) from err

    def list_sessions(self, *, owner: str | None = None, limit: int = 100) -> list[SessionRecord]:
        with self.db.transaction() as db:
            return sessions.list_sessions(db, owner=owner, limit=limit)

    def session_summaries(
        self, *, owner: str | None = None, limit: int = 100
    ) -> list[tuple[SessionRecord, RunRecord | None]]:
        """Sessions, most recently active first, each with its latest run (None before
        its first): a session list's status without asking Temporal about each one."""
        with self.db.transaction() as db:
            listed = sessions.list_sessions(db, owner=owner, limit=limit)
            return [(s, next(iter(runs.list_runs(db, s.id, limit=1)), None)) for s in listed]

    def children(self, session_id: str) -> list[SessionRecord]:
        """The session's sub-agents: sessions its runs' `delegate` calls made, oldest first;
        each names the run (`parent_run_id`) and the call (`parent_tool_call_id`)."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return sessions.children(db, session_id)

    def parent(self, session_id: str) -> SessionRecord | None:
        """The session whose `delegate` call made this one; None for any other session."""
        session = self.get_session(session_id)
        if session.parent_tool_call_id is None or session.parent_session_id is None:
            return None
        with self.db.transaction() as db:
            return sessions.get_session(db, session.parent_session_id)

    def entries(self, session_id: str) -> list[SessionEntry]:
        """Every entry of the session tree, in the order they were stored."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return entries.list_entries(db, session_id)

    def path(self, session_id: str) -> list[SessionEntry]:
        """The current branch: entries from the root to the session's leaf."""
        session = self.get_session(session_id)
        with self.db.transaction() as db:
            return entries.load_path(db, session.leaf_id)

    def labels(self, session_id: str) -> dict[str, str]:
        """Each labelled entry's current label (the latest label entry for it wins)."""
        return current_labels(self.entries(session_id))

    def require_entry(self, session_id: str, entry_id: str) -> None:
        """`EntryNotInSession` unless `entry_id` is an entry of the session."""
        with self.db.transaction() as db:
            found = entries.belongs_to(db, entry_id, session_id)
        if not found:
            self.get_session(session_id)
            raise EntryNotInSession(session_id, entry_id)

    def display_messages(self, session_id: str, *, after: int = 0) -> list[DisplayMessage]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return display.list_display(db, session_id, after=after)

    def runs(self, session_id: str) -> list[RunRecord]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return runs.list_runs(db, session_id)

    def costs(self, session_id: str) -> SessionCosts:
        """What the session's runs cost, each and together, priced per model from the
        assistant messages they stored (`store.usage`) with `self.prices`."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            by_run = self.usage_tally.read(db, session_id)
        return session_costs(by_run, self.prices)

    def cursor(self, session_id: str) -> int:
        """The session's newest event seq (numbered per session from 1): follow from here
        to see only what comes next."""
        with self.db.transaction() as db:
            return events.latest_seq(db, session_id)

    def run_state(self, run_id: str) -> RunRecord | None:
        with self.db.transaction() as db:
            return runs.get_run(db, run_id)

    def queue_items(self, session_id: str, *, status: str | None = "pending") -> list[QueueItem]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return input_queue.list_items(db, session_id, status=status)

    def queue_item(self, session_id: str, item_id: str) -> QueueItem:
        with self.db.transaction() as db:
            item = input_queue.get_item(db, item_id)
        if item is None or item.session_id != session_id:
            raise QueueItemNotFound(session_id, item_id)
        return item

    def next_turn_items(self, session_id: str) -> list[QueueItem]:
        """next_turn messages still waiting for a run."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return input_queue.list_items(db, session_id, kind="next_turn")

    def resources(self, session_id: str, kind: ResourceKind) -> list[str]:
        """Names of the skills (or templates) a run of the session can invoke, looked up
        as a worker does: the workspace's `.duragent/`, then `$DURAGENT_HOME/resources/`."""
        workspace = Path(self.get_session(session_id).workspace)
        found = load_resources(workspace, self.settings.resources_dir)
        return sorted(resource.name for resource in found if resource.kind == kind)

    def read_events(self, session_id: str, *, after: int = 0) -> list[StoredEvent]:
        """The next batch of the session's run events after the cursor `after`."""
        with self.db.transaction() as db:
            return events.read_events(db, session_id, after=after)

    def display_before(
        self, session_id: str, before: int | None, *, limit: int
    ) -> tuple[list[DisplayMessage], bool]:
        """The page of display messages just before the cursor `before` (the newest page
        without one), oldest first, bounded in count and bytes; and whether earlier
        messages exist."""
        with self.db.transaction() as db:
            return display.messages_before(db, session_id, before, limit=limit)

    def session_page(
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
        with self.db.transaction() as db:
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
            by_run = self.usage_tally.read(db, session_id)
        return SessionPage(
            messages=shown,
            messages_more=more,
            messages_earlier=earlier,
            events=activity,
            events_more=events_more,
            latest_run=latest[0] if latest else None,
            input_queue=pending,
            costs=session_costs(by_run, self.prices),
        )
