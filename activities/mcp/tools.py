"""One MCP server's tools as the model sees them, and their calls through the connection."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import mcp.types

from duragent.activities.mcp.config import McpConfig, ServerConfig
from duragent.activities.mcp.connection import ServerConnection, ServerUnavailable
from duragent.activities.mcp.names import model_names, split_name
from duragent.activities.tools.contract import ToolContext, ToolSource
from duragent.activities.tools.truncation import truncate_head
from duragent.domain.messages import ImageContent, TextContent, ToolResultContent
from duragent.domain.tools import ToolResult, ToolSpec, ToolTraits

logger = logging.getLogger(__name__)

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""What the Messages API accepts as an image; other media reach the model as a note."""


class McpServerTools(ToolSource):
    """The tools of the server `name`, listed anew once per turn (`refresh`) and cached in
    between; calls go over the server's one connection."""

    kind = "MCP server"

    def __init__(self, name: str, config: ServerConfig, log: Path | None = None) -> None:
        self.name = name
        self.connection = ServerConnection(name, config, log)
        self._traits = ToolTraits(retry_safe=config.retry_safe)
        self._tools: dict[str, mcp.types.Tool] = {}
        """By the model's name, in the server's order."""
        self._unavailable: str | None = None
        """Why the last listing failed, if it did."""

    def owns(self, name: str) -> bool:
        parts = split_name(name)
        return parts is not None and parts[0] == self.name

    def names(self) -> list[str]:
        return list(self._tools)

    def traits(self, name: str) -> ToolTraits:
        del name  # the server's config speaks for all its tools
        return self._traits

    async def refresh(self) -> None:
        """List the server's tools again; if it cannot be reached, the last list stays (a
        call then says the server is unavailable, which tells the model more than a tool
        that vanished)."""
        try:
            listed = await self.connection.list_tools()
        except ServerUnavailable as exc:
            logger.warning("%s", exc)
            self._unavailable = str(exc)
            return
        self._unavailable = None
        by_name = {tool.name: tool for tool in listed}
        mapped = model_names(self.name, by_name)
        self._tools = {model: by_name[tool] for model, tool in mapped.items()}

    def api_specs(self) -> list[ToolSpec]:
        return [
            {
                "name": model,
                "description": tool.description or f"`{tool.name}` of MCP server {self.name}",
                "input_schema": tool.input_schema,
            }
            for model, tool in self._tools.items()
        ]

    async def run(self, name: str, raw_args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        del ctx  # the server runs where it runs, not in the session's workspace
        tool = self._tools.get(name)
        if tool is None:  # listed on another worker, not yet on this one
            await self.refresh()
            tool = self._tools.get(name)
        if tool is None and self._unavailable is not None:
            return ToolResult.error(self._unavailable, mcp_server=self.name, unavailable=True)
        if tool is None:
            offered = ", ".join(self._tools) or "none"
            return ToolResult.error(
                f"Tool '{name}' is not a tool of MCP server '{self.name}' (its tools: {offered})."
            )
        try:
            result = await self.connection.call_tool(tool.name, raw_args)
        except ServerUnavailable as exc:
            return ToolResult.error(str(exc), mcp_server=self.name, unavailable=True)
        return tool_result(self.name, tool.name, result)

    async def aclose(self) -> None:
        await self.connection.close()


def mcp_providers(config: McpConfig, logs: Path | None = None) -> list[McpServerTools]:
    """A provider per server; a stdio server's stderr goes to `logs/<server>.log`, if given."""
    return [
        McpServerTools(name, server, logs / f"{name}.log" if logs else None)
        for name, server in config.servers.items()
    ]


def tool_result(server: str, tool: str, result: mcp.types.CallToolResult) -> ToolResult:
    """The server's answer as our result: text and images as they are, other content as
    a line saying what it was; structured content as JSON when there is nothing else."""
    content: list[ToolResultContent] = []
    for block in result.content:
        if isinstance(block, mcp.types.TextContent):
            content.append(TextContent(text=block.text))
        elif isinstance(block, mcp.types.ImageContent) and block.mime_type in IMAGE_TYPES:
            content.append(ImageContent(media_type=block.mime_type, data=block.data))
        elif isinstance(block, mcp.types.EmbeddedResource) and isinstance(
            block.resource, mcp.types.TextResourceContents
        ):
            content.append(TextContent(text=f"[{block.resource.uri}]\n{block.resource.text}"))
        elif isinstance(block, mcp.types.ResourceLink):
            content.append(TextContent(text=f"[resource link: {block.name} {block.uri}]"))
        else:
            kind = getattr(block, "mime_type", None) or block.type
            content.append(TextContent(text=f"[{block.type} content ({kind}) not shown]"))
    if not content and result.structured_content is not None:
        content.append(TextContent(text=json.dumps(result.structured_content, ensure_ascii=False)))
    if not content:
        content.append(TextContent(text="(no output)"))
    for i, part in enumerate(content):
        if isinstance(part, TextContent):
            cut = truncate_head(part.text)
            if cut.truncated:
                note = f"\n[output cut to {cut.output_lines} of {cut.total_lines} lines]"
                content[i] = TextContent(text=cut.text + note)
    return ToolResult(
        content=content,
        details={"mcp_server": server, "tool": tool},
        is_error=bool(result.is_error),
    )
