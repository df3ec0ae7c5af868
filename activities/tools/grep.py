"""`grep`: search file contents with a Python regular expression."""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Generator, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext, ToolInputError
from duragent.activities.tools.find import GlobMatcher, join, run_walk_in_thread, walk
from duragent.activities.tools.paths import display_path, resolve_in_workspace
from duragent.activities.tools.truncation import DEFAULT_MAX_BYTES, format_size, truncate_head
from duragent.domain.tools import ToolResult, ToolTraits

DEFAULT_GREP_LIMIT = 100
MAX_LINE_CHARS = 500
"""Longer lines (minified code, data) are cut so one match cannot flood the output."""

_BINARY_SNIFF_BYTES = 8192


class GrepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1, description="Python regular expression (or plain text with literal=true)."
    )
    path: str = Field(
        default=".",
        description="File or directory to search, relative to the workspace or absolute inside it.",
    )
    glob: str | None = Field(
        default=None,
        description='Only search files matching this glob, e.g. "*.py" or "src/**/*.ts".',
    )
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")
    literal: bool = Field(
        default=False, description="Treat pattern as plain text, not a regular expression."
    )
    context: int = Field(
        default=0, ge=0, le=50, description="Lines of context to show before and after each match."
    )
    limit: int = Field(
        default=DEFAULT_GREP_LIMIT, ge=1, description="Maximum number of matches to return."
    )


@dataclass
class _Search:
    """Accumulates output lines across files, in grep's format."""

    regex: re.Pattern[str]
    context: int
    limit: int
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    files_with_matches: int = 0
    limit_reached: bool = False

    _last_emitted: int | None = field(default=None, init=False, repr=False)

    def search_file(self, path: Path, shown: str) -> None:
        """Append the matches (and context) of one file; stop at the match limit."""
        before: deque[tuple[int, str]] = deque(maxlen=self.context)
        after = 0
        found_here = False
        self._last_emitted = None
        with closing(_text_lines(path)) as lines:
            for number, text in lines:
                if self.limit_reached:
                    if not after:
                        return
                    # Trailing context of the last allowed match, even if it matches too.
                    self._emit(shown, number, text, is_match=False)
                    after -= 1
                elif self.regex.search(text):
                    if not found_here:
                        found_here = True
                        self.files_with_matches += 1
                    for before_number, before_text in before:
                        self._emit(shown, before_number, before_text, is_match=False)
                    before.clear()
                    self._emit(shown, number, text, is_match=True)
                    self.matches += 1
                    after = self.context
                    self.limit_reached = self.matches >= self.limit
                elif after:
                    self._emit(shown, number, text, is_match=False)
                    after -= 1
                else:
                    before.append((number, text))

    def _emit(self, shown: str, number: int, text: str, *, is_match: bool) -> None:
        last = self._last_emitted
        if self.context and self.lines and (last is None or number > last + 1):
            self.lines.append("--")  # between groups and between files, as grep does
        sep = ":" if is_match else "-"
        self.lines.append(f"{shown}{sep}{number}{sep} {_clip(text)}")
        self._last_emitted = number


def _clip(text: str) -> str:
    if len(text) <= MAX_LINE_CHARS:
        return text
    return text[:MAX_LINE_CHARS] + f"... [{len(text) - MAX_LINE_CHARS} more characters]"


def _text_lines(path: Path) -> Generator[tuple[int, str], None, None]:
    """Numbered lines of a text file; nothing for binary or unreadable files."""
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(_BINARY_SNIFF_BYTES):
                return
            f.seek(0)
            for number, raw in enumerate(f, start=1):
                yield number, raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8", errors="replace")
    except OSError:
        return  # vanished or unreadable mid-walk: skip it rather than fail the search


def _files(
    workspace: Path, root: Path, matcher: GlobMatcher | None, stop: threading.Event
) -> Iterator[Path]:
    if root.is_file():
        if matcher is None or matcher.matches(root.name):
            yield root
        return
    for directory, _dirnames, filenames in walk(root, stop):
        for name in filenames:
            if stop.is_set():
                return
            relative = join(directory, name)
            if matcher is not None and not matcher.matches(relative):
                continue
            path = root / relative
            if not path.is_file():
                continue  # a FIFO or a device would block the search forever
            if path.is_symlink():
                # A link may point outside the workspace; never read through such a link.
                target = path.resolve()
                if not target.is_relative_to(workspace) or not target.is_file():
                    continue
            yield path


def _search(
    workspace: Path, root: Path, args: GrepArgs, regex: re.Pattern[str], stop: threading.Event
) -> _Search:
    matcher = GlobMatcher(args.glob) if args.glob else None
    search = _Search(regex=regex, context=args.context, limit=args.limit)
    for path in _files(workspace, root, matcher, stop):
        search.search_file(path, display_path(workspace, path))
        if search.limit_reached:
            break
    return search


def compile_pattern(args: GrepArgs) -> re.Pattern[str]:
    source = re.escape(args.pattern) if args.literal else args.pattern
    try:
        return re.compile(source, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolInputError(
            f"invalid regular expression {args.pattern!r}: {exc} "
            "(use literal=true to search for plain text)"
        ) from None


class GrepTool(Tool[GrepArgs]):
    name = "grep"
    description = (
        "Search file contents for a regular expression (Python syntax), recursively under "
        "path (a directory or a single file). Output lines look like 'path:line: text'; "
        "context lines look like 'path-line- text' and groups are separated by '--'. Paths "
        "are relative to the workspace root. Binary files and .git, node_modules and .venv "
        f"are skipped; lines longer than {MAX_LINE_CHARS} characters are cut. Stops after "
        f"limit matches (default {DEFAULT_GREP_LIMIT}). Use glob to restrict file names, "
        "literal=true for plain text, ignore_case for case-insensitive search."
    )
    args_model = GrepArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=True)

    async def execute(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        regex = compile_pattern(args)
        workspace = ctx.workspace.resolve()
        root = resolve_in_workspace(workspace, args.path)
        if not root.exists():
            return ToolResult.error(f"Path not found: {display_path(workspace, root)}")
        search = await run_walk_in_thread(lambda stop: _search(workspace, root, args, regex, stop))
        if not search.matches:
            return ToolResult.text("No matches found.", matches=0)
        cut = truncate_head("\n".join(search.lines), max_bytes=DEFAULT_MAX_BYTES)
        notices = []
        if search.limit_reached:
            notices.append(
                f"[Stopped at {args.limit} matches; there may be more. Narrow the pattern, "
                "path or glob, or raise limit.]"
            )
        if cut.truncated:
            notices.append(
                f"[Output cut to {cut.output_lines} lines ({format_size(DEFAULT_MAX_BYTES)} "
                "limit). Narrow the search to see the rest.]"
            )
        text = cut.text + "".join(f"\n\n{notice}" for notice in notices)
        return ToolResult.text(
            text,
            matches=search.matches,
            files=search.files_with_matches,
            truncated=search.limit_reached or cut.truncated,
        )
