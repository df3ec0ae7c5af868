"""One session as the chat follows it: its conversation (`Transcript`), its latest run,
phase, turn, pending input and costs, read from the store when it opens and kept up to
date from its run events; the store is read again after the events that change it, and
every `POLL_S` (input queued from another client makes no event).

Everything comes from the store, so every client attached to a session (two terminals,
the page) shows the same, and a chat that comes back shows what happened meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from duragent.client.chat.link import Link
from duragent.client.chat.transcript import Transcript
from duragent.client.display import SessionPage
from duragent.domain.cost import SessionCosts
from duragent.store.records import QueueItem, RunRecord, StoredEvent

REFRESH_ON = frozenset(
    {
        "agent_start",
        "agent_end",
        "turn_end",
        "save_point",
        "queue_consumed",
        "run_aborted",
        "runtime_guidance_injected",
        "compaction_end",
        "branch_summary",
        "budget_reached",
        "budget_raised",
    }
)
"""Events after which the store holds new display messages, queue or run state."""
POLL_S = 1.5
"""How often the store is read again when no such event came: the input queue (another
client's chips), the run's usage."""
RETRY_S = 2.0
"""How long to wait before reading again after the store or Temporal did not answer."""


class SessionFeed:
    """A session's state for a view; `changed` is called after each change."""

    def __init__(self, link: Link, session_id: str, changed: Callable[[], None]) -> None:
        self.link = link
        self.session_id = session_id
        self.changed = changed
        self.transcript = Transcript()
        self.latest_run: RunRecord | None = None
        self.queue: list[QueueItem] = []
        self.costs: SessionCosts | None = None
        self.phase = "idle"
        self.turn: int | None = None
        self.turn_run: str | None = None
        self.messages_cursor = 0
        self.events_cursor = 0
        self.runs_seen: set[str] = set()
        """Runs an event of has come: a run started here is no longer 'starting'."""
        self.points: dict[str, str] = {}
        """Queue item id -> where its guidance reached the agent."""
        self.consumed: set[str] = set()
        """Queue items a run took as its next-turn input."""
        self.model: str | None = None
        """The model of the session's next turn, as it was when the session opened."""
        self.error: str | None = None
        """Why the store or Temporal cannot be read now (None: it can)."""
        self._refreshed = 0.0

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    async def open(self) -> None:
        """Read what the store has: the newest messages, and the latest run's events
        from its start (so the run in progress shows whole, its waits included)."""
        page = await self.link.opening(self.session_id)
        self.transcript.add_display(page.messages)
        self.messages_cursor = page.messages[-1].seq if page.messages else 0
        events = page.events
        starts = [i for i, e in enumerate(events) if e.type == "agent_start"]
        running = page.latest_run is not None and page.latest_run.status == "running"
        first = starts[-1] if starts else (0 if running else len(events))
        for event in events[first:]:
            self.apply(event)
        self.events_cursor = events[-1].seq if events else 0
        self._take(page)
        try:
            status = await self.link.status(self.session_id)
            self.phase = status.phase
            self.model = status.config.model
        except Exception:  # no Temporal answering: the store's run state says enough
            self.phase = "turn" if running else "idle"
        self.changed()

    def apply(self, event: StoredEvent) -> None:
        if event.seq <= self.events_cursor and self.events_cursor:
            return  # each event once
        self.events_cursor = max(self.events_cursor, event.seq)
        if event.run_id:
            self.runs_seen.add(event.run_id)
        p = event.payload
        if event.type == "agent_start":
            self.phase, self.turn, self.turn_run = "turn", 0, event.run_id
        elif event.type == "turn_start":
            self.turn, self.turn_run = p["turn"], event.run_id
        elif event.type == "phase_changed":
            self.phase = p["phase"]
        elif event.type == "agent_end":
            self.phase = "idle"
            self.turn = p.get("turns", self.turn)
        elif event.type == "compaction_start":
            self.phase = "compaction" if self.phase == "idle" else self.phase
        elif event.type == "compaction_end" and self.phase == "compaction":
            self.phase = "idle"
        elif event.type == "runtime_guidance_injected":
            for item in p["item_ids"]:
                self.points[item] = p["point"]
        elif event.type == "queue_consumed" and p["queue"] == "next_turn":
            self.consumed.add(p["entry_id"])
        self.transcript.apply(event)

    async def follow(self) -> None:
        """Follow the session's events until cancelled, reading the store again after
        those that change it; a store or Temporal that does not answer is said, and
        read again."""
        while True:
            try:
                async for batch in self.link.follow(self.session_id, self.events_cursor):
                    for event in batch:
                        self.apply(event)
                    due = time.monotonic() - self._refreshed >= POLL_S
                    if any(e.type in REFRESH_ON for e in batch) or due:
                        await self.refresh()
                    if batch:
                        self.changed()
                    if self.error is not None:
                        self.error = None
                        self.changed()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the store went away: say so, try again
                self.error = f"cannot read the session now: {error}"
                self.changed()
                await asyncio.sleep(RETRY_S)

    async def refresh(self) -> None:
        page = await self.link.refresh(self.session_id, self.messages_cursor, self.events_cursor)
        self.transcript.add_display(page.messages)
        if page.messages:
            self.messages_cursor = page.messages[-1].seq
        self._take(page)
        self.changed()

    def _take(self, page: SessionPage) -> None:
        self._refreshed = time.monotonic()
        self.latest_run = page.latest_run
        self.queue = page.input_queue
        self.costs = page.costs
        for item in page.input_queue:
            self.transcript.guidance_texts.setdefault(item.id, item.text)
        latest = page.latest_run
        if latest is None:
            return
        over = latest.status != "running"
        if over and self.phase in ("turn", "retry") and latest.run_id in self.runs_seen:
            self.phase = "idle"  # its end is stored, its workflow takes its last step
        if latest.run_id == self.turn_run or self.turn_run is None:
            self.turn_run = latest.run_id
            self.turn = max(latest.turns, self.turn or 0) if not over else latest.turns
