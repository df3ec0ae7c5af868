"""Everything `duragent chat` asks of the Python client, in one place.

The app, its widgets and its slash commands never hold the client: they hold a `Link`,
one async method per thing they ask. The client's store reads are synchronous today
(sessions, the input queue, the tree, the display pages, events): those run on a thread
here (`asyncio.to_thread`), so the screen never waits on the store, and when the client
becomes async-only only this module changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duragent.client.api import DuragentClient, RunHandle
from duragent.client.display import SessionPage
from duragent.client.sessions import SessionStatus
from duragent.domain.budgets import Budget, BudgetView, Limit, Scope
from duragent.domain.cost import SessionCosts
from duragent.domain.entries import SessionEntry
from duragent.domain.runs import RunResult
from duragent.domain.tree_ops import CompactResult, NavigateResult
from duragent.store.records import QueueItem, RunRecord, SessionRecord, StoredEvent

OPEN_MESSAGES = 200
"""Display messages read when a session opens: the newest ones (earlier ones with
`earlier_messages`)."""
OPEN_EVENTS = 2000
"""Run events read when a session opens: enough for the run in progress to show whole."""
REFRESH_MESSAGES = 200

BUDGET_FIELDS: dict[Limit, str] = {
    "turns": "max_turns",
    "tokens": "max_tokens",
    "cost": "max_cost_usd",
    "wall": "max_wall_s",
}


@dataclass(frozen=True)
class TreeSnapshot:
    """A session's tree as `/tree` shows it: every entry, the leaf, the labels."""

    entries: list[SessionEntry]
    leaf_id: str | None
    labels: dict[str, str]


class Link:
    """The chat's one way to the client (`DuragentClient`), for one process."""

    def __init__(self, client: DuragentClient) -> None:
        self._client = client

    @property
    def offline_model(self) -> bool:
        """No key for the default model's provider: the scripted offline model answers."""
        return self._client.settings.offline

    # Sessions -----------------------------------------------------------------------

    async def session(self, session_id: str) -> SessionRecord:
        """The session's record (`SessionNotFound` for an id no session has)."""
        return await self._client.sessions.get(session_id)

    async def create_session(
        self,
        *,
        agent: str | None = None,
        model: str | None = None,
        workspace: Path | None = None,
        name: str | None = None,
    ) -> SessionRecord:
        return await self._client.sessions.create(
            agent=agent, model=model, workspace=workspace, name=name
        )

    async def status(self, session_id: str) -> SessionStatus:
        """Phase and config (the open run is asked; the store answers when it cannot)."""
        return await self._client.sessions.status(session_id)

    async def children(self, session_id: str) -> list[SessionRecord]:
        """The session's sub-agents (each names the delegate call that made it)."""
        return await self._client.sessions.children(session_id)

    async def costs(self, session_id: str) -> SessionCosts:
        return await self._client.sessions.costs(session_id)

    async def runs(self, session_id: str) -> list[RunRecord]:
        """The session's runs, newest first."""
        return await self._client.runs.list(session_id)

    # What a view shows ----------------------------------------------------------------

    async def opening(self, session_id: str) -> SessionPage:
        """The newest display messages and run events, the latest run, the pending
        input and the costs, read together."""
        return await self._client.display.page(
            session_id,
            messages_after=None,
            messages_limit=OPEN_MESSAGES,
            events_after=None,
            events_limit=OPEN_EVENTS,
        )

    async def refresh(self, session_id: str, messages_after: int, events_after: int) -> SessionPage:
        """What changed in the store since the cursors: display messages after
        `messages_after` (a page), the latest run, the pending input, the costs. (Events
        are followed on their own: one is read here, and not used.)"""
        return await self._client.display.page(
            session_id,
            messages_after=messages_after,
            messages_limit=REFRESH_MESSAGES,
            events_after=events_after,
            events_limit=1,
        )

    async def follow(self, session_id: str, after: int) -> AsyncIterator[list[StoredEvent]]:
        """The session's run events after the cursor, batch by batch, for as long as the
        caller reads (an empty batch: nothing new yet)."""
        async for batch in self._client.events.batches(session_id, after=after):
            yield batch

    async def events_cursor(self, session_id: str) -> int:
        return await self._client.events.cursor(session_id)

    # Input ---------------------------------------------------------------------------

    async def send(self, session_id: str, text: str) -> RunHandle | QueueItem:
        """What Enter does: an idle session starts a run, a busy one queues the text."""
        return await self._client.inputs.send(session_id, text)

    async def guide(self, session_id: str, text: str) -> QueueItem:
        """Text as guidance for the open run (`SessionIdle` when none is open)."""
        return await self._client.inputs.guide_text(session_id, text)

    async def steer(self, session_id: str, text: str) -> str:
        return await self._client.inputs.steer(session_id, text)

    async def follow_up(self, session_id: str, text: str) -> str:
        return await self._client.inputs.follow_up(session_id, text)

    async def queue(self, session_id: str) -> list[QueueItem]:
        """The pending items of the session's input queue, oldest first."""
        return await self._client.inputs.queue(session_id)

    async def item(self, session_id: str, item_id: str) -> QueueItem:
        """One item of the input queue, whatever became of it."""
        return await self._client.inputs.item(session_id, item_id)

    async def edit_item(self, session_id: str, item_id: str) -> str:
        """Take a queued item back: it is cancelled, its text returned."""
        return await self._client.inputs.edit(session_id, item_id)

    async def guide_item(self, session_id: str, item_id: str) -> QueueItem:
        """A queued item as guidance for the open run."""
        return await self._client.inputs.guide(session_id, item_id)

    async def delete_item(self, session_id: str, item_id: str) -> None:
        await self._client.inputs.delete(session_id, item_id)

    # The run ------------------------------------------------------------------------

    async def stop(self, session_id: str) -> RunResult:
        """Abort the open run: its tools killed, its pending input cancelled."""
        return await self._client.runs.abort(session_id)

    async def wait_idle(self, session_id: str) -> RunResult | None:
        """Wait until no run of the session is open (runs that queued input starts
        included); the last one's result, None when none was open."""
        result = None
        while await self._client.workflows.open_run(session_id) is not None:
            try:
                result = await self._client.runs.wait(session_id)
            except LookupError:
                await asyncio.sleep(0.2)  # the workflow is there, its run not yet
        return result

    async def approve(self, session_id: str, call_id: str, *, always: bool = False) -> None:
        await self._client.approvals.approve(session_id, call_id, always=always)

    async def deny(self, session_id: str, call_id: str, reason: str | None = None) -> None:
        await self._client.approvals.deny(session_id, call_id, reason)

    async def answer(self, session_id: str, call_id: str, text: str) -> None:
        await self._client.questions.answer(session_id, call_id, text)

    # Config, budget, tree, files -----------------------------------------------------------

    async def set_model(self, session_id: str, model: str) -> None:
        """The model of the session's turns from the next one on."""
        await self._client.config.update(session_id, model=model)

    async def budget(self, session_id: str) -> BudgetView:
        return await self._client.budgets.get(session_id)

    async def set_budget(self, session_id: str, budget: Budget | dict[str, Any]) -> None:
        await self._client.budgets.set(session_id, budget)

    async def raise_limit(
        self, session_id: str, scope: Scope | None, limit: Limit, value: float
    ) -> BudgetView:
        """Raise one limit of the budget the run waits on (or `scope`'s), the other
        limits kept as they are."""
        view = await self._client.budgets.get(session_id)
        which: Scope = scope or (view.waiting[0].scope if view.waiting else "run")
        old = view.run_budget if which == "run" else view.session_budget
        fields: dict[str, Any] = (old or Budget()).model_dump()
        fields[BUDGET_FIELDS[limit]] = int(value) if limit in ("turns", "tokens") else value
        return await self._client.budgets.raise_limits(session_id, fields, scope=which)

    async def compact(self, session_id: str, instructions: str | None = None) -> CompactResult:
        return await self._client.tree.compact(session_id, instructions=instructions)

    async def tree(self, session_id: str) -> TreeSnapshot:
        def read() -> TreeSnapshot:
            entries = self._client.sync.tree.entries(session_id)
            leaf = self._client.sync.sessions.get(session_id).leaf_id
            return TreeSnapshot(entries, leaf, self._client.sync.tree.labels(session_id))

        return await asyncio.to_thread(read)

    async def goto(self, session_id: str, entry_id: str) -> NavigateResult:
        """Move the leaf (idle only); a user message's text comes back to edit."""
        return await self._client.tree.navigate(session_id, entry_id)

    async def fork(self, session_id: str, entry_id: str) -> SessionRecord:
        return await self._client.sessions.fork(session_id, entry_id)

    async def export(self, session_id: str, path: Path) -> int:
        """Write the session as a `duragent-session` file; how many lines it has."""

        def write() -> int:
            lines = self._client.sync.session_files.export(session_id)
            path.write_text("".join(lines), encoding="utf-8")
            return len(lines)

        return await asyncio.to_thread(write)
