"""`read`: a window of a text file, or an image for the model to look at."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.paths import display_path, resolve_in_workspace
from duragent.activities.tools.truncation import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size
from duragent.domain.messages import ImageContent, TextContent
from duragent.domain.tools import ToolResult, ToolTraits

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The model API rejects larger images; failing here gives the model a clearer message."""

_BINARY_SNIFF_BYTES = 8192


class ReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to read, relative to the workspace or absolute inside it.")
    offset: int | None = Field(
        default=None, ge=1, description="Line number to start from (1-based). Default: 1."
    )
    limit: int | None = Field(default=None, ge=1, description="Maximum number of lines to return.")


@dataclass
class _Window:
    lines: list[str]
    total_lines: int
    stopped_by: str | None
    """Why lines after the window were left out: "limit", "lines", "bytes", or None."""
    partial_line: bool


def _read_window(path: Path, offset: int, limit: int | None) -> _Window | None:
    """Read lines [offset, offset+limit) within the output budget; None for a binary file.

    Streams the file so a huge log costs one pass and a bounded amount of memory.
    """
    lines: list[str] = []
    used = 0
    stopped_by: str | None = None
    partial = False
    total = 0
    with path.open("rb") as f:
        if b"\0" in f.read(_BINARY_SNIFF_BYTES):
            return None
        f.seek(0)
        for total, raw in enumerate(f, start=1):
            if total < offset or stopped_by is not None:
                continue
            if limit is not None and len(lines) >= limit:
                stopped_by = "limit"
                continue
            if len(lines) >= DEFAULT_MAX_LINES:
                stopped_by = "lines"
                continue
            line = raw.rstrip(b"\n").rstrip(b"\r")
            size = len(line) + (1 if lines else 0)
            if used + size > DEFAULT_MAX_BYTES:
                stopped_by = "bytes"
                if not lines:
                    # One line alone exceeds the budget: show its start rather than nothing.
                    line = line[:DEFAULT_MAX_BYTES]
                    partial = True
                    lines.append(line.decode("utf-8", errors="ignore"))
                continue
            lines.append(line.decode("utf-8", errors="replace"))
            used += size
    return _Window(lines, total, stopped_by, partial)


class ReadTool(Tool[ReadArgs]):
    name = "read"
    description = (
        "Read a file in the workspace. Text files are returned as plain text (no line "
        f"numbers), at most {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024} KB per "
        "call; when more remains, a notice at the end gives the offset to continue from. "
        "Use offset (1-based line number) and limit to read a specific part of a large file. "
        "Images (png, jpg, gif, webp) are returned as images. Paths are relative to the "
        "workspace root; absolute paths must be inside it."
    )
    args_model = ReadArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=True)

    async def execute(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.workspace, args.path)
        shown = display_path(ctx.workspace, path)
        if not path.exists():
            return ToolResult.error(f"File not found: {shown}")
        if path.is_dir():
            return ToolResult.error(f"{shown} is a directory; use ls to list it.")
        if not path.is_file():
            # A FIFO or device could block the reading thread forever.
            return ToolResult.error(f"{shown} is not a regular file.")
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        if media_type is not None:
            return await _read_image(path, shown, media_type)

        offset = args.offset or 1
        window = await asyncio.to_thread(_read_window, path, offset, args.limit)
        if window is None:
            return ToolResult.error(f"{shown} looks like a binary file; it cannot be read as text.")
        if offset > max(window.total_lines, 1):
            return ToolResult.error(
                f"Offset {offset} is beyond the end of {shown} ({window.total_lines} lines)."
            )
        text = "\n".join(window.lines)
        if not text.strip():
            # The model API rejects blank text blocks.
            text = f"({len(window.lines)} blank lines)" if window.lines else "(empty file)"
        end = offset + len(window.lines) - 1
        notice = _continuation_notice(window, offset, end)
        return ToolResult.text(
            text + (f"\n\n{notice}" if notice else ""),
            path=shown,
            start_line=offset,
            end_line=end,
            total_lines=window.total_lines,
            truncated=window.stopped_by is not None,
        )


def _continuation_notice(window: _Window, start: int, end: int) -> str:
    if window.stopped_by is None:
        return ""
    if window.stopped_by == "limit":
        remaining = window.total_lines - end
        return f"[{remaining} more lines in file. Use offset={end + 1} to continue.]"
    if window.partial_line:
        return (
            f"[Line {start} is longer than {format_size(DEFAULT_MAX_BYTES)}; only its start is "
            f"shown. Use bash (e.g. cut or head -c) to see the rest, or offset={end + 1} to "
            "skip it.]"
        )
    reason = f" ({format_size(DEFAULT_MAX_BYTES)} limit)" if window.stopped_by == "bytes" else ""
    return (
        f"[Showing lines {start}-{end} of {window.total_lines}{reason}. "
        f"Use offset={end + 1} to continue.]"
    )


async def _read_image(path: Path, shown: str, media_type: str) -> ToolResult:
    size = path.stat().st_size
    if size > MAX_IMAGE_BYTES:
        return ToolResult.error(
            f"Image {shown} is {format_size(size)}; the limit is {format_size(MAX_IMAGE_BYTES)}."
        )
    data = await asyncio.to_thread(path.read_bytes)
    return ToolResult(
        content=[
            TextContent(text=f"Read image file {shown} [{media_type}, {format_size(size)}]"),
            ImageContent(media_type=media_type, data=base64.b64encode(data).decode("ascii")),
        ],
        details={"path": shown, "media_type": media_type, "bytes": size},
    )
