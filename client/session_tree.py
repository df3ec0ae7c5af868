"""The session tree's structural operations: compaction and navigation (workflows of their own)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from temporalio.exceptions import WorkflowAlreadyStartedError

from duragent.client.bounds import bounded
from duragent.client.session_workflows import SessionWorkflows
from duragent.domain.compaction import CompactionSettings
from duragent.domain.tree_ops import CompactInput, CompactResult, NavigateInput, NavigateResult
from duragent.workflows.session_structure import SessionCompaction, SessionNavigation


class SessionTree(SessionWorkflows):
    """Compact a session, or move its leaf."""

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
        await asyncio.to_thread(self.require_entry, session_id, entry_id)
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
        await asyncio.to_thread(self.get_session, session_id)
        try:
            return await self._start_session_workflow(run, data, session_id, kind)
        except WorkflowAlreadyStartedError as err:
            raise await self._busy(session_id) from err
