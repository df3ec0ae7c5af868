"""Session writes (`client.writes`): a config change or entries, held as the open run's
pending writes until its next save point, or stored at once when the session is idle."""

from __future__ import annotations

import uuid

from temporalio.common import WorkflowIDReusePolicy

from duragent.client.bounds import bounded
from duragent.client.part import ClientPart
from duragent.client.temporal_setup import search_attributes_required
from duragent.domain.changes import ConfigChange, FacadeEntry, SessionChange
from duragent.domain.entries import SessionEntry
from duragent.domain.runs import session_workflow_id
from duragent.domain.search_attributes import session_attributes
from duragent.store.clock import now_ms
from duragent.workflows.session_changes import SessionChanges


class SessionWrites(ClientPart):
    """How config changes and session entries reach a session (the other parts' setters
    and appenders use it), and what the open run holds."""

    async def apply(
        self,
        session_id: str,
        *,
        config: ConfigChange | None = None,
        entries: list[FacadeEntry] | None = None,
    ) -> None:
        """Apply a change: pending in the open run until its next save point, or applied
        at once (by a short workflow under the session's id) when the session is idle."""
        change = SessionChange(
            id=uuid.uuid4().hex, config=config, entries=entries or [], timestamp=now_ms()
        )
        bounded("session change", change)
        await self._client.sessions.get(session_id)
        with search_attributes_required(self._client.settings.temporal_namespace):
            handle = await self._client.temporal.start_workflow(
                SessionChanges.run,
                session_id,
                id=session_workflow_id(session_id),
                task_queue=self._client.settings.task_queue,
                start_signal="change",
                start_signal_args=[change],
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                search_attributes=session_attributes(session_id, "changes"),
            )
        # Idle session: wait until the change is stored, so a read or a prompt right
        # after sees it. (A busy session's run holds it as a pending write instead.)
        described = await handle.describe()
        if described.workflow_type == "SessionChanges":
            await handle.result()

    async def pending(self, session_id: str) -> list[SessionEntry]:
        """Writes of the open run that session reads may not show yet (a save point in
        progress may be storing them)."""
        status = await self._client.sessions.status(session_id)
        return status.run.pending_writes if status.run else []
