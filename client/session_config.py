"""Session config (`client.config`): model, thinking level, tools, MCP servers, system
prompt, queue modes. Getters (`client.sessions.status(...).config`) see a change at once;
turns from the next one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from pydantic import ValidationError

from duragent.activities.mcp.names import check_server_names
from duragent.client.bounds import bounded, one_line
from duragent.client.errors import InvalidChange
from duragent.client.part import ClientPart
from duragent.domain.changes import ConfigChange, ConfigUpdate
from duragent.domain.config import QueueMode, ThinkingLevel, check_tool_names


class SessionConfigs(ClientPart):
    """Set a session's config (allowed during a turn)."""

    async def update(self, session_id: str, **fields: Unpack[ConfigUpdate]) -> None:
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
                check_tool_names(config.active_tools, self._client.known_tools())
            except ValueError as err:  # McpConfigError is one too
                raise InvalidChange(f"active_tools: {err}") from err
        if config.mcp_servers is not None:
            try:
                check_server_names(config.mcp_servers, self._client.mcp_servers())
            except ValueError as err:
                raise InvalidChange(f"mcp_servers: {err}") from err
        await self._client.writes.apply(session_id, config=config)

    async def set_model(self, session_id: str, model: str) -> None:
        await self.update(session_id, model=model)

    async def set_thinking_level(self, session_id: str, level: ThinkingLevel) -> None:
        await self.update(session_id, thinking_level=level)

    async def set_active_tools(self, session_id: str, tools: Sequence[str]) -> None:
        await self.update(session_id, active_tools=list(tools))

    async def set_mcp_servers(self, session_id: str, servers: Sequence[str]) -> None:
        """Use only these of the workers' MCP servers (empty: none)."""
        await self.update(session_id, mcp_servers=list(servers))

    async def set_system_prompt(self, session_id: str, prompt: str) -> None:
        await self.update(session_id, system_prompt=prompt)

    async def set_queue_modes(
        self,
        session_id: str,
        *,
        steering: QueueMode | None = None,
        follow_up: QueueMode | None = None,
    ) -> None:
        await self.update(session_id, steering_mode=steering, follow_up_mode=follow_up)
