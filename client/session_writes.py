"""Session writes allowed while a run is open: config changes and extension entries, held
as the run's pending writes until its next save point."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy

from duragent.activities.mcp.names import check_server_names
from duragent.client.bounds import bounded, one_line
from duragent.client.errors import InvalidChange
from duragent.client.session_workflows import KIND_ATTR, SESSION_ID_ATTR, SessionWorkflows
from duragent.domain.changes import ConfigChange, FacadeEntry, SessionChange
from duragent.domain.config import QueueMode, ThinkingLevel, check_tool_names
from duragent.domain.entries import (
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    SessionEntry,
    SessionInfoEntry,
)
from duragent.domain.messages import TextContent
from duragent.domain.runs import session_workflow_id
from duragent.store.clock import now_ms
from duragent.workflows.session_changes import SessionChanges


class SessionWrites(SessionWorkflows):
    """Config setters and session writes (allowed during a turn)."""

    async def change(self, session_id: str, change: SessionChange) -> None:
        """Apply a change: pending in the open run until its next save point, or applied
        at once (by a short workflow under the session's id) when the session is idle."""
        bounded("session change", change)
        await asyncio.to_thread(self.get_session, session_id)
        handle = await self.temporal.start_workflow(
            SessionChanges.run,
            session_id,
            id=session_workflow_id(session_id),
            task_queue=self.settings.task_queue,
            start_signal="change",
            start_signal_args=[change],
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(SESSION_ID_ATTR, session_id),
                    SearchAttributePair(KIND_ATTR, "changes"),
                ]
            ),
        )
        # Idle session: wait until the change is stored, so a read or a prompt right
        # after sees it. (A busy session's run holds it as a pending write instead.)
        described = await handle.describe()
        if described.workflow_type == "SessionChanges":
            await handle.result()

    async def configure(self, session_id: str, **fields: Any) -> None:
        """Set config: model, thinking_level, active_tools, system_prompt, max_tokens,
        steering_mode, follow_up_mode, mcp_servers. Getters see it at once; turns from the
        next one."""
        for field, value in fields.items():
            if value is not None:
                bounded(field.replace("_", " "), value)
        try:
            config = ConfigChange(**fields)
        except ValidationError as err:
            raise InvalidChange(one_line(err)) from err
        if config.active_tools is not None:
            try:
                check_tool_names(config.active_tools, self.known_tools())
            except ValueError as err:  # McpConfigError is one too
                raise InvalidChange(f"active_tools: {err}") from err
        if config.mcp_servers is not None:
            try:
                check_server_names(config.mcp_servers, self.mcp_servers())
            except ValueError as err:
                raise InvalidChange(f"mcp_servers: {err}") from err
        await self.change(session_id, self._change(config=config))

    async def set_model(self, session_id: str, model: str) -> None:
        await self.configure(session_id, model=model)

    async def set_thinking_level(self, session_id: str, level: ThinkingLevel) -> None:
        await self.configure(session_id, thinking_level=level)

    async def set_active_tools(self, session_id: str, tools: Sequence[str]) -> None:
        await self.configure(session_id, active_tools=list(tools))

    async def set_mcp_servers(self, session_id: str, servers: Sequence[str]) -> None:
        """Use only these of the workers' MCP servers (empty: none)."""
        await self.configure(session_id, mcp_servers=list(servers))

    async def set_system_prompt(self, session_id: str, prompt: str) -> None:
        await self.configure(session_id, system_prompt=prompt)

    async def set_queue_modes(
        self,
        session_id: str,
        *,
        steering: QueueMode | None = None,
        follow_up: QueueMode | None = None,
    ) -> None:
        await self.configure(session_id, steering_mode=steering, follow_up_mode=follow_up)

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
        await self.change(session_id, self._change(entries=[entry]))
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
        await self.change(session_id, self._change(entries=[entry]))
        return entry.id

    async def set_label(self, session_id: str, entry_id: str, label: str | None) -> None:
        if label is not None:
            bounded("label", label)
        entry = LabelEntry(
            id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), target_id=entry_id, label=label
        )
        await self.change(session_id, self._change(entries=[entry]))

    async def set_name(self, session_id: str, name: str) -> None:
        bounded("session name", name)
        entry = SessionInfoEntry(id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), name=name)
        await self.change(session_id, self._change(entries=[entry]))

    async def pending_writes(self, session_id: str) -> list[SessionEntry]:
        """Writes of the open run that session reads may not show yet (a save point in
        progress may be storing them)."""
        status = await self.status(session_id)
        return status.run.pending_writes if status.run else []

    @staticmethod
    def _change(
        *, config: ConfigChange | None = None, entries: list[FacadeEntry] | None = None
    ) -> SessionChange:
        return SessionChange(
            id=uuid.uuid4().hex, config=config, entries=entries or [], timestamp=now_ms()
        )
