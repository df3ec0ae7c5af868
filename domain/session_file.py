"""Portable sessions: a session's whole tree as JSON Lines (`duragent export`/`import`).

The format, `duragent-session` version 1:

- line 1, the header: `{"format": "duragent-session", "version": 1, "source": {...},
  "session": {"name", "config", "leaf_id", "created_at"}, "entries": N}`. `source` says
  where it came from (this program and its version, the session's id, when it was
  exported); `config` is the session's config as its current branch has it (model,
  thinking level, system prompt, tools, queue modes, approval policy, MCP server names,
  budget: what `duragent status` shows), which the imported session's paths start from
  (a branch that never changed a setting takes the current branch's); `entries` counts
  the lines that follow, so a file cut short is refused.
- then one line per entry, in the order they were stored (a parent before its
  children): the entry as `domain.entries` has it (`id`, `parent_id`, `timestamp`,
  `type` and its fields: messages with their usage, config changes, compactions, branch
  summaries, labels, leaf moves, custom entries), with `run_id` when a run (or a
  compaction or navigation) wrote it, which keeps what the session's model calls used
  counted per run.

What a file never holds: the session's owner, its workspace folder and host (they are
the deployment's; an import gets its own), the API's tokens (the store keeps none per
session), run states and events, staged messages and the input queue (the run history
and what waits for the next run, not the session's tree).

`read_session_file` reads this format, and pi's own session files (`domain.pi_session`),
checking everything first (`domain.session_file_checks`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duragent.domain.config import SessionConfig
from duragent.domain.entries import SessionEntry, entry_adapter
from duragent.domain.pi_session import read_pi_session
from duragent.domain.session_file_checks import (
    MAX_ENTRIES,
    MAX_NAME_CHARS,
    Line,
    NumberedEntry,
    SessionFile,
    SessionFileRefused,
    check_id,
    check_tree,
    file_lines,
    references,
    validation_reason,
)

FORMAT = "duragent-session"
VERSION = 1
MEDIA_TYPE = "application/x-ndjson"


class ExportSource(BaseModel):
    """Where a file came from: for people reading it; an import takes nothing from it."""

    model_config = ConfigDict(extra="forbid")

    app: Literal["duragent"] = "duragent"
    app_version: str = Field(max_length=100)
    session_id: str = Field(max_length=64)
    exported_at: int = Field(ge=0)


class ExportedSession(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(max_length=MAX_NAME_CHARS)
    config: SessionConfig
    leaf_id: str | None
    created_at: int = Field(ge=0)


class ExportHeader(BaseModel):
    """Line 1 of a `duragent-session` file."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["duragent-session"] = "duragent-session"
    version: int
    source: ExportSource
    session: ExportedSession
    entries: int = Field(ge=0, le=MAX_ENTRIES)


@dataclass(frozen=True)
class StoredEntry:
    """An entry as the store holds it: with the run that wrote it."""

    entry: SessionEntry
    run_id: str | None


def export_lines(header: ExportHeader, entries: Sequence[StoredEntry]) -> Iterator[str]:
    """The file's lines, each one JSON object and a newline."""
    yield _line(header.model_dump(mode="json"))
    for stored in entries:
        data = stored.entry.model_dump(mode="json")
        if stored.run_id is not None:
            data["run_id"] = stored.run_id
        yield _line(data)


def _line(data: dict[str, Any]) -> str:
    # ASCII only: a line never holds a raw line separator, whatever the text.
    return json.dumps(data, separators=(",", ":"), ensure_ascii=True) + "\n"


def read_session_file(data: bytes) -> SessionFile:
    """The session a file holds, checked whole; `SessionFileRefused` (line and reason)
    for anything wrong. Reads `duragent-session` files and pi's session files."""
    lines = file_lines(data)
    first = next(lines, None)
    if first is None:
        raise SessionFileRefused(None, "the file is empty")
    if "format" in first.data:
        return _read_duragent(first, lines)
    if first.data.get("type") == "session":
        return read_pi_session(first, lines)
    raise SessionFileRefused(
        first.number,
        f'not a session file: the first line is neither a "{FORMAT}" header nor a pi '
        'session header ({"type": "session", ...})',
    )


def _read_duragent(first: Line, lines: Iterator[Line]) -> SessionFile:
    if first.data.get("format") != FORMAT:
        raise SessionFileRefused(
            first.number, f"format {first.data.get('format')!r} is not {FORMAT!r}"
        )
    if first.data.get("version") != VERSION:
        raise SessionFileRefused(
            first.number,
            f"{FORMAT} version {first.data.get('version')!r} is not one this duragent reads "
            f"(version {VERSION})",
        )
    try:
        header = ExportHeader.model_validate(first.data)
    except ValidationError as error:
        raise SessionFileRefused(first.number, f"header: {validation_reason(error)}") from None
    entries = [_entry(line) for line in lines]
    if len(entries) != header.entries:
        raise SessionFileRefused(
            None,
            f"the header says {header.entries} entries and the file holds {len(entries)} "
            "(cut short, or added to)",
        )
    leaf_id = header.session.leaf_id
    if leaf_id is not None:
        check_id(leaf_id, "session.leaf_id", first.number)
    check_tree(entries, leaf_id, first.number)
    return SessionFile(
        kind="duragent",
        source_id=header.source.session_id,
        name=header.session.name,
        config=header.session.config,
        leaf_id=leaf_id,
        entries=entries,
        created_at=header.session.created_at,
    )


def _entry(line: Line) -> NumberedEntry:
    data = dict(line.data)
    run_id = data.pop("run_id", None)
    if run_id is not None:
        check_id(run_id, "run_id", line.number)
    try:
        entry = entry_adapter.validate_python(data)
    except ValidationError as error:
        kind = data.get("type")
        what = f"{kind!r} entry" if isinstance(kind, str) else "entry"
        raise SessionFileRefused(line.number, f"{what}: {validation_reason(error)}") from None
    return NumberedEntry(line=line.number, entry=entry, run_id=run_id)


def stored_entries(
    file: SessionFile, ids: Mapping[str, str] | None = None, runs: Mapping[str, str] | None = None
) -> list[StoredEntry]:
    """The file's entries as the store will hold them: with `ids`, each entry id (and
    every link to one: parent, label target, first kept entry, ...) replaced by its new
    id, and with `runs` each run id by its own; without, as the file has them."""
    stored: list[StoredEntry] = []
    for numbered in file.entries:
        entry, run_id = numbered.entry, numbered.run_id
        if ids is not None:
            links = {"id": ids[entry.id], "parent_id": ids.get(entry.parent_id or "")}
            links |= {field: ids[target] for field, target in references(entry)}
            entry = entry.model_copy(update=links)
        if runs is not None and run_id is not None:
            run_id = runs[run_id]
        stored.append(StoredEntry(entry=entry, run_id=run_id))
    return stored


def file_ids(file: SessionFile) -> tuple[list[str], list[str]]:
    """The entry ids and the distinct run ids of a file, in file order."""
    runs = dict.fromkeys(e.run_id for e in file.entries if e.run_id is not None)
    return [e.entry.id for e in file.entries], list(runs)
