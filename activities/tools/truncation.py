"""Tool output cut to a line and byte budget (what the model reads of a long output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024


@dataclass(frozen=True)
class Truncation:
    """Text cut to a line and byte budget, with what was cut."""

    text: str
    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    output_lines: int
    partial_line: bool = False
    """A single line was larger than the byte budget and only part of it is kept."""


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a trailing newline ends the last line; it does not start a new one
    return lines


def _cut_utf8(line: str, max_bytes: int, *, keep_end: bool) -> str:
    data = line.encode()
    piece = data[-max_bytes:] if keep_end else data[:max_bytes]
    # Dropping a split multi-byte character is better than emitting a replacement char.
    return piece.decode(errors="ignore")


def _truncate(text: str, max_lines: int, max_bytes: int, *, from_end: bool) -> Truncation:
    lines = _split_lines(text)
    total = len(lines)
    ordered = reversed(lines) if from_end else iter(lines)
    kept: list[str] = []
    used = 0
    by: Literal["lines", "bytes"] | None = None
    partial = False
    for line in ordered:
        if len(kept) >= max_lines:
            by = "lines"
            break
        size = len(line.encode()) + (1 if kept else 0)
        if used + size > max_bytes:
            by = "bytes"
            if not kept:
                kept.append(_cut_utf8(line, max_bytes, keep_end=from_end))
                partial = True
            break
        kept.append(line)
        used += size
    if from_end:
        kept.reverse()
    if by is None:
        return Truncation(text, False, None, total, total)
    return Truncation("\n".join(kept), True, by, total, len(kept), partial)


def truncate_head(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the first whole lines that fit both budgets (for file contents, search results)."""
    return _truncate(text, max_lines, max_bytes, from_end=False)


def truncate_tail(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep the last whole lines that fit both budgets (for command output: errors come last)."""
    return _truncate(text, max_lines, max_bytes, from_end=True)


def format_size(n_bytes: int) -> str:
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.0f} KB"
    return f"{n_bytes / (1024 * 1024):.1f} MB"
