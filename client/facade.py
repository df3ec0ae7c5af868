"""The session facade extensions get (docs/SPEC.md): persisted reads, pending-safe writes."""

from __future__ import annotations

from typing import Any

from duragent.client.api import DuragentClient
from duragent.domain.entries import SessionEntry


class SessionFacade:
    """One session, as an extension may touch it.

    Reads return persisted state only (never what waits for a save point). Writes made
    while a run is open become pending writes of that run and land at its next save
    point (or when it ends); on an idle session they are stored at once.
    """

    def __init__(self, client: DuragentClient, session_id: str) -> None:
        self._client = client
        self.session_id = session_id

    # Hooks run on a worker's event loop: the client reads the store on a thread.
    async def path(self) -> list[SessionEntry]:
        return await self._client.tree.path(self.session_id)

    async def entries(self) -> list[SessionEntry]:
        return await self._client.tree.entries(self.session_id)

    async def pending_writes(self) -> list[SessionEntry]:
        return await self._client.writes.pending(self.session_id)

    async def append_custom_entry(
        self, custom_type: str, data: dict[str, Any] | None = None
    ) -> str:
        return await self._client.tree.append_custom_entry(self.session_id, custom_type, data)

    async def append_custom_message(
        self, custom_type: str, text: str, *, display: bool = True
    ) -> str:
        return await self._client.tree.append_custom_message(
            self.session_id, custom_type, text, display=display
        )

    async def set_label(self, entry_id: str, label: str | None) -> None:
        await self._client.tree.label(self.session_id, entry_id, label)

    async def set_name(self, name: str) -> None:
        await self._client.sessions.rename(self.session_id, name)
