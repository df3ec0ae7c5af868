"""`ls`: the entries of one directory."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.paths import display_path, resolve_in_workspace
from duragent.domain.tools import ToolResult, ToolTraits

DEFAULT_LS_LIMIT = 500


class LsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        default=".",
        description="Directory to list, relative to the workspace or absolute inside it.",
    )
    limit: int = Field(
        default=DEFAULT_LS_LIMIT, ge=1, description="Maximum number of entries to return."
    )


def _entries(path: Path) -> list[str]:
    names = []
    with os.scandir(path) as it:
        for entry in it:
            try:
                is_dir = entry.is_dir()  # follows symlinks: a link to a directory reads as one
            except OSError:
                is_dir = False
            names.append(entry.name + "/" if is_dir else entry.name)
    # Case-insensitive order groups README and readme.txt the way people expect.
    return sorted(names, key=lambda name: (name.lower(), name))


class LsTool(Tool[LsArgs]):
    name = "ls"
    description = (
        "List a directory: one entry per line, sorted alphabetically, directories marked "
        f"with a trailing '/', dotfiles included. At most limit entries (default "
        f"{DEFAULT_LS_LIMIT}). Not recursive; use find for that. Paths are relative to the "
        "workspace root; absolute paths must be inside it."
    )
    args_model = LsArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=True)

    async def execute(self, args: LsArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.workspace, args.path)
        shown = display_path(ctx.workspace, path)
        if not path.exists():
            return ToolResult.error(f"Directory not found: {shown}")
        if not path.is_dir():
            return ToolResult.error(f"{shown} is not a directory; use read for files.")
        entries = await asyncio.to_thread(_entries, path)
        total = len(entries)
        shown_entries = entries[: args.limit]
        text = "\n".join(shown_entries) if entries else "(empty directory)"
        limited = total > args.limit
        if limited:
            text += (
                f"\n\n[Showing {args.limit} of {total} entries. Use a larger limit to see more.]"
            )
        return ToolResult.text(
            text, path=shown, entries=len(shown_entries), total=total, truncated=limited
        )
