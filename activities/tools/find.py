"""`find`: paths matching a glob, plus the glob matching and walk that grep shares."""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from duragent.activities.tools.contract import Tool, ToolContext
from duragent.activities.tools.paths import SKIPPED_DIRS, display_path, resolve_in_workspace
from duragent.domain.tools import ToolResult, ToolTraits

DEFAULT_FIND_LIMIT = 1000

T = TypeVar("T")


# --- globs ---------------------------------------------------------------------------


def expand_braces(pattern: str) -> list[str]:
    """`*.{ts,tsx}` -> [`*.ts`, `*.tsx`]; nested and repeated groups are expanded too."""
    depth = 0
    start = -1
    for i, char in enumerate(pattern):
        if char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                options = _split_top_level(pattern[start + 1 : i])
                if len(options) < 2:
                    continue  # "{x}" is literal, as in the shell
                head, tail = pattern[:start], pattern[i + 1 :]
                return [
                    expanded
                    for option in options
                    for expanded in expand_braces(head + option + tail)
                ]
    return [pattern]


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        current.append(char)
    parts.append("".join(current))
    return parts


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := segment.find("]", i + 2)) != -1:
            # Searching from i + 2 lets "[]x]" contain "]", as in the shell.
            body = segment[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = re.sub(r"([\\\[\]^&~|])", r"\\\1", body[1:] if negate else body)
            out.append("[" + ("^" if negate else "") + body + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _glob_regex(pattern: str) -> str:
    segments = pattern.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment) + ("" if last else "/"))
    return "".join(out)


class GlobMatcher:
    """Matches POSIX relative paths against a glob.

    A pattern without "/" matches the file name at any depth ("*.py"); one with "/" matches
    the whole path relative to the search root ("src/**/*.ts"), where "**" spans any number
    of directories, including none. "{a,b}" alternatives are supported; "*" matches
    dotfiles too.
    """

    def __init__(self, pattern: str) -> None:
        pattern = pattern.strip().removeprefix("./")
        self.pattern = pattern
        self._by_name = "/" not in pattern
        alternatives = expand_braces(pattern)
        self._regex = re.compile("|".join(f"(?:{_glob_regex(p)})" for p in alternatives))

    def matches(self, relative_path: str) -> bool:
        target = relative_path.rsplit("/", 1)[-1] if self._by_name else relative_path
        return self._regex.fullmatch(target) is not None


# --- walking -------------------------------------------------------------------------


def walk(root: Path, stop: threading.Event) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk` in sorted order, skipping `SKIPPED_DIRS` and not following symlinked dirs.

    Yields (directory relative to root in POSIX form, "" for the root, subdirectory names,
    file names). Not following links keeps the walk inside the workspace and cycle-free.
    Ends early once `stop` is set.
    """
    for dirpath, dirnames, filenames in os.walk(root):
        if stop.is_set():
            return
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        relative = Path(dirpath).relative_to(root).as_posix()
        yield ("" if relative == "." else relative), dirnames, sorted(filenames)


def join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


async def run_walk_in_thread(work: Callable[[threading.Event], T]) -> T:
    """Run `work(stop)` in a thread; on cancellation, set `stop` and re-raise at once.

    A thread cannot be interrupted, so a cancelled search would otherwise keep walking a
    large tree in the background; `stop` makes it give up at the next directory or file.
    """
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    except asyncio.CancelledError:
        stop.set()
        raise


# --- the tool ------------------------------------------------------------------------


class FindArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        min_length=1,
        description=(
            'Glob to match, e.g. "*.py" (file name at any depth), "src/**/*.ts" (path '
            'relative to the search directory) or "*.{ts,tsx}".'
        ),
    )
    path: str = Field(
        default=".",
        description="Directory to search, relative to the workspace or absolute inside it.",
    )
    limit: int = Field(
        default=DEFAULT_FIND_LIMIT, ge=1, description="Maximum number of results to return."
    )


def _find(
    root: Path, matcher: GlobMatcher, limit: int, stop: threading.Event
) -> tuple[list[str], bool]:
    """Matching paths relative to `root` (directories with a trailing "/"), and whether the
    walk stopped at `limit`."""
    found: list[str] = []
    for directory, dirnames, filenames in walk(root, stop):
        candidates = [(join(directory, d), "/") for d in dirnames]
        candidates += [(join(directory, f), "") for f in filenames]
        for relative, suffix in candidates:
            if matcher.matches(relative):
                if len(found) >= limit:
                    return found, True
                found.append(relative + suffix)
    return found, False


class FindTool(Tool[FindArgs]):
    name = "find"
    description = (
        "Find files and directories whose path matches a glob. A pattern without '/' "
        "matches names at any depth ('*.py'); with '/' it matches the path from the search "
        "directory ('src/**/*.ts', where ** spans any number of directories). Results are "
        "paths relative to the workspace root, sorted, directories ending in '/'; .git, "
        f"node_modules and .venv are skipped. At most limit results (default "
        f"{DEFAULT_FIND_LIMIT}). Paths are relative to the workspace root; absolute paths "
        "must be inside it."
    )
    args_model = FindArgs
    traits: ClassVar[ToolTraits] = ToolTraits(retry_safe=True)

    async def execute(self, args: FindArgs, ctx: ToolContext) -> ToolResult:
        root = resolve_in_workspace(ctx.workspace, args.path)
        shown_root = display_path(ctx.workspace, root)
        if not root.exists():
            return ToolResult.error(f"Directory not found: {shown_root}")
        if not root.is_dir():
            return ToolResult.error(f"{shown_root} is not a directory.")
        matcher = GlobMatcher(args.pattern)
        found, limited = await run_walk_in_thread(
            lambda stop: _find(root, matcher, args.limit, stop)
        )
        if not found:
            return ToolResult.text(
                f"No files found matching '{args.pattern}' in {shown_root}.", count=0
            )
        prefix = "" if shown_root == "." else shown_root + "/"
        paths = sorted(prefix + relative for relative in found)
        text = "\n".join(paths)
        if limited:
            text += (
                f"\n\n[Stopped after {args.limit} results; there are more. Use a more specific "
                "pattern or path, or a larger limit.]"
            )
        return ToolResult.text(text, count=len(paths), truncated=limited)
