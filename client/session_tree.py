"""The session tree (`client.tree`): its entries and current path, labels and extension
entries, and its structural operations, compaction and navigation (workflows of their
own)."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.exceptions import WorkflowAlreadyStartedError

from duragent.client.bounds import bounded
from duragent.client.errors import EntryNotInSession
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import (
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    SessionEntry,
    current_labels,
)
from duragent.domain.messages import TextContent
from duragent.domain.tree_ops import CompactInput, CompactResult, NavigateInput, NavigateResult
from duragent.store import entries
from duragent.store.clock import now_ms
from duragent.workflows.session_structure import SessionCompaction, SessionNavigation


class SyncTree(SyncPart):
    """A session's stored tree (`client.sync.tree`): its entries and current path."""

    def entries(self, session_id: str) -> list[SessionEntry]:
        """Every entry of the session tree, in the order they were stored."""
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return entries.list_entries(db, session_id)

    def path(self, session_id: str) -> list[SessionEntry]:
        """The current branch: entries from the root to the session's leaf."""
        session = self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return entries.load_path(db, session.leaf_id)

    def labels(self, session_id: str) -> dict[str, str]:
        """Each labelled entry's current label (the latest label entry for it wins)."""
        return current_labels(self.entries(session_id))

    def require_entry(self, session_id: str, entry_id: str) -> None:
        """`EntryNotInSession` unless `entry_id` is an entry of the session."""
        with self._client.db.transaction() as db:
            found = entries.belongs_to(db, entry_id, session_id)
        if not found:
            self._client.sync.sessions.get(session_id)
            raise EntryNotInSession(session_id, entry_id)


class SessionTree(StoreBackedPart[SyncTree]):
    """Read a session's tree, add entries to it, compact it, or move its leaf."""

    entries = in_thread(SyncTree.entries)
    path = in_thread(SyncTree.path)
    labels = in_thread(SyncTree.labels)
    require_entry = in_thread(SyncTree.require_entry)

    async def append_custom_entry(
        self, session_id: str, custom_type: str, data: dict[str, Any] | None = None
    ) -> str:
        """Store extension state in the session (never sent to the model)."""
        bounded("custom entry", {"custom_type": custom_type, "data": data or {}})
        entry = CustomEntry(
            id=uuid.uuid4().hex,
            parent_id=None,
            timestamp=now_ms(),
            custom_type=custom_type,
            data=data or {},
        )
        await self._client.writes.apply(session_id, entries=[entry])
        return entry.id

    async def append_custom_message(
        self, session_id: str, custom_type: str, text: str, *, display: bool = True
    ) -> str:
        """A message of an extension's that the model sees (and the UI, if `display`)."""
        bounded("custom message type", custom_type)
        bounded("custom message", text)
        entry = CustomMessageEntry(
            id=uuid.uuid4().hex,
            parent_id=None,
            timestamp=now_ms(),
            custom_type=custom_type,
            content=[TextContent(text=text)],
            display=display,
        )
        await self._client.writes.apply(session_id, entries=[entry])
        return entry.id

    async def label(self, session_id: str, entry_id: str, label: str | None) -> None:
        if label is not None:
            bounded("label", label)
        entry = LabelEntry(
            id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), target_id=entry_id, label=label
        )
        await self._client.writes.apply(session_id, entries=[entry])

    async def compact(
        self,
        session_id: str,
        *,
        instructions: str | None = None,
        settings: CompactionSettings | None = None,
    ) -> CompactResult:
        """Compact an idle session now (`SessionBusy` while a run is open)."""
        if instructions is not None:
            bounded("compaction instructions", instructions)
        data = CompactInput(
            session_id=session_id,
            op_id=uuid.uuid4().hex,
            instructions=instructions,
            settings=settings or CompactionSettings(),
        )
        handle = await self._structural(session_id, SessionCompaction.run, data, "compaction")
        result: CompactResult = await handle.result()
        return result

    async def navigate(
        self,
        session_id: str,
        entry_id: str,
        *,
        summarize: bool = False,
        instructions: str | None = None,
    ) -> NavigateResult:
        """Move the session's leaf to `entry_id` (a user message: to its parent, and its
        text comes back for editing), optionally summarising the branch left behind."""
        if instructions is not None:
            bounded("summary instructions", instructions)
        await self.require_entry(session_id, entry_id)
        data = NavigateInput(
            session_id=session_id,
            op_id=uuid.uuid4().hex,
            target_entry_id=entry_id,
            summarize=summarize,
            instructions=instructions,
        )
        handle = await self._structural(session_id, SessionNavigation.run, data, "navigation")
        result: NavigateResult = await handle.result()
        return result

    async def _structural(self, session_id: str, run: Any, data: Any, kind: str) -> Any:
        """Start a structural operation under the session's id: refused while busy."""
        await self._client.sessions.get(session_id)
        try:
            return await self._client.workflows.start(run, data, session_id, kind)
        except WorkflowAlreadyStartedError as err:
            raise await self._client.workflows.busy(session_id) from err
