"""`write`: create or overwrite a file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.paths import display_path, resolve_in_workspace
from duragent.domain.tools import ToolResult, ToolTraits


class WriteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to write, relative to the workspace or absolute inside it.")
    content: str = Field(description="The complete new content of the file.")


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


class WriteTool(Tool[WriteArgs]):
    name = "write"
    description = (
        "Write content to a file, creating it and any missing parent directories, or "
        "replacing it entirely if it exists. Prefer edit for changing part of an existing "
        "file. Paths are relative to the workspace root; absolute paths must be inside it."
    )
    args_model = WriteArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=False)

    async def execute(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.workspace, args.path)
        shown = display_path(ctx.workspace, path)
        if path.is_dir():
            return ToolResult.error(f"{shown} is a directory; give a file path.")
        if path.exists() and not path.is_file():
            # Writing to a FIFO or device could block the writing thread forever.
            return ToolResult.error(f"{shown} is not a regular file.")
        data = args.content.encode("utf-8")
        await asyncio.to_thread(_write, path, data)
        return ToolResult.text(f"Wrote {len(data)} bytes to {shown}", path=shown, bytes=len(data))
