"""`edit`: replace one exact, unique piece of text in a file."""

from __future__ import annotations

import asyncio
import difflib
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.paths import display_path, resolve_in_workspace
from duragent.domain.tools import ToolResult, ToolTraits

_BOM = "\ufeff"


class EditArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to edit, relative to the workspace or absolute inside it.")
    old_text: str = Field(
        min_length=1,
        description=(
            "Exact text to replace, including whitespace and indentation. It must occur "
            "exactly once in the file; include surrounding lines to make it unique."
        ),
    )
    new_text: str = Field(description="Text to put in its place (may be empty to delete).")


class EditTool(Tool[EditArgs]):
    name = "edit"
    description = (
        "Replace text in an existing file. old_text must match exactly one place in the file, "
        "character for character (whitespace and indentation included); if it matches zero "
        "or several places nothing is changed and you get an error. Read the file first. "
        "Paths are relative to the workspace root; absolute paths must be inside it."
    )
    args_model = EditArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=False)

    async def execute(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_in_workspace(ctx.workspace, args.path)
        shown = display_path(ctx.workspace, path)
        if not path.is_file():
            return ToolResult.error(f"File not found: {shown}")
        raw = await asyncio.to_thread(path.read_bytes)
        try:
            original = raw.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult.error(f"{shown} is not UTF-8 text; edit cannot change it.")

        # The model sees files through `read`, which shows LF line endings and no BOM; match
        # in that form and restore the file's own conventions when writing back.
        bom = _BOM if original.startswith(_BOM) else ""
        # Only a consistently CRLF file is normalised; a mixed one is matched as it is.
        crlf = "\r\n" in original and original.count("\r\n") == original.count("\n")
        text = original.removeprefix(bom)
        if crlf:
            text = text.replace("\r\n", "\n")
        old = args.old_text.replace("\r\n", "\n")
        new = args.new_text.replace("\r\n", "\n")

        count = text.count(old)
        if count == 0:
            return ToolResult.error(
                f"old_text not found in {shown}. It must match exactly, including whitespace "
                "and indentation; read the file to check the current content."
            )
        if count > 1:
            return ToolResult.error(
                f"old_text found {count} times in {shown}; add surrounding context to make it "
                "unique."
            )
        if old == new:
            return ToolResult.error("old_text and new_text are identical; nothing to change.")

        position = text.index(old)
        updated = text[:position] + new + text[position + len(old) :]
        output = bom + (updated.replace("\n", "\r\n") if crlf else updated)
        await asyncio.to_thread(_write_text, path, output)

        diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                updated.splitlines(keepends=True),
                fromfile=f"a/{shown}",
                tofile=f"b/{shown}",
            )
        )
        return ToolResult.text(
            f"Replaced 1 occurrence in {shown}.",
            path=shown,
            diff=diff,
            first_changed_line=text.count("\n", 0, position) + 1,
        )


def _write_text(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8"))
