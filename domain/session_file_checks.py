"""What a session file must be before anything of it is stored (see `domain.session_file`).

A file to import comes from anywhere: it may be cut short, edited by hand, or made to
hurt. Each check here refuses it with the line and the reason (`SessionFileRefused`),
before the store is touched: sizes (the file, a line, the number of entries), JSON that
parses to an object of sane values (no NaN, no integers past 2^53, no NUL or lone
surrogates, which PostgreSQL refuses or cannot encode, no deep nesting), ids of one shape,
and a tree: unique ids, every parent and every entry an entry names (a label's target, a
compaction's first kept entry, ...) on an earlier line, so there can be no cycle and no
dangling link. Two links may name their own entry: a compaction's first kept entry (it
keeps nothing of the path before it) and a branch summary's origin (it came back to
before the first entry).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duragent.domain.config import SessionConfig
from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    LabelEntry,
    LeafEntry,
    SessionEntry,
    SessionInfoEntry,
)
from duragent.domain.errors import DuragentError

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A whole file: room for thousands of turns with long tool outputs."""
MAX_LINE_BYTES = 8 * 1024 * 1024
"""One entry: a read tool's image (5 MiB, a third more as base64) and its JSON."""
MAX_ENTRIES = 100_000
MAX_DEPTH = 64
"""How deeply a line's JSON may nest (a tool's arguments or details nest a few levels)."""
MAX_NAME_CHARS = 200
"""A session's name, as the store keeps it."""
MAX_SAFE_INTEGER = 2**53 - 1
"""Past this a number is not exact in JSON readers, nor an integer in every SQL cast."""

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
ID_RULE = "1 to 64 letters, digits, '_', '-', '.' or ':', starting with a letter or digit"


class SessionFileRefused(DuragentError, ValueError):
    """A session file that cannot be imported: where (line 1 is the header) and why."""

    def __init__(self, line: int | None, reason: str) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{reason}; nothing was imported")
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Line:
    """A line of the file that holds something: its number (from 1) and its JSON object."""

    number: int
    data: dict[str, Any]


def file_lines(data: bytes) -> Iterator[Line]:
    """The file's non-blank lines as JSON objects, each checked (`json_object`); refuses
    a file over `MAX_FILE_BYTES`, a line over `MAX_LINE_BYTES`, and more lines than a
    header and `MAX_ENTRIES` entries."""
    if len(data) > MAX_FILE_BYTES:
        raise SessionFileRefused(
            None,
            f"the file is {len(data)} bytes; the most a session file may be is "
            f"{MAX_FILE_BYTES} bytes ({MAX_FILE_BYTES // (1024 * 1024)} MiB)",
        )
    count = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        if len(raw) > MAX_LINE_BYTES:
            raise SessionFileRefused(
                number,
                f"the line is {len(raw)} bytes; the most an entry may be is {MAX_LINE_BYTES} bytes",
            )
        if not raw.strip():
            continue
        count += 1
        if count > MAX_ENTRIES + 1:
            raise SessionFileRefused(number, f"more than {MAX_ENTRIES} entries")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SessionFileRefused(number, f"not UTF-8 text ({error.reason})") from None
        yield Line(number, json_object(text, number))


def json_object(text: str, number: int) -> dict[str, Any]:
    """One line's JSON, which must be an object of sane values (see the module)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise SessionFileRefused(number, "the JSON nests too deeply") from None
    except ValueError as error:  # json.JSONDecodeError, and integers too long to read
        raise SessionFileRefused(number, f"not valid JSON ({_short(str(error))})") from None
    if not isinstance(value, dict):
        raise SessionFileRefused(number, f"a JSON object was expected, not {_kind(value)}")
    _check_values(value, number, 0)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _check_values(value: Any, number: int, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SessionFileRefused(number, f"the JSON nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, number)
            _check_values(item, number, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_values(item, number, depth + 1)
    elif isinstance(value, str):
        _check_text(value, number)
    elif isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise SessionFileRefused(number, f"the number {_short(str(value))} is out of range")


def _check_text(text: str, number: int) -> None:
    if "\x00" in text:
        raise SessionFileRefused(number, "a text holds a NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SessionFileRefused(number, "a text holds a lone UTF-16 surrogate") from None


def check_id(value: object, what: str, number: int) -> str:
    """`value` as an id (`ID_RULE`), or refused naming `what`."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise SessionFileRefused(number, f"{what} {_short(repr(value))} is not an id ({ID_RULE})")
    return value


def validation_reason(error: ValidationError) -> str:
    """A pydantic error as a short reason: the bad field and its rule. Of a union's
    errors the deepest is the telling one (the member that nearly matched)."""
    errors = error.errors(include_url=False)
    worst = max(errors, key=lambda e: len(e["loc"]))
    # Union members show in the location as their types (`list[tagged-union[...]]`).
    where = ".".join(str(part) for part in worst["loc"] if "[" not in str(part)) or "value"
    return f"{where}: {worst['msg']}"


@dataclass(frozen=True)
class NumberedEntry:
    """An entry read from the file, with its line and the run that wrote it (if any)."""

    line: int
    entry: SessionEntry
    run_id: str | None = None


SELF_LINKS = frozenset({"first_kept_entry_id", "from_entry_id"})
"""The links that may name their own entry: a compaction that keeps nothing of the path
before it, a branch summary back to before the first entry (no entry to come from)."""


def references(entry: SessionEntry) -> list[tuple[str, str]]:
    """The (field, entry id) pairs an entry names besides its parent."""
    if isinstance(entry, LabelEntry | LeafEntry):
        return [("target_id", entry.target_id)]
    if isinstance(entry, CompactionEntry):
        return [("first_kept_entry_id", entry.first_kept_entry_id)]
    if isinstance(entry, BranchSummaryEntry):
        return [("from_entry_id", entry.from_entry_id)]
    return []


def check_tree(entries: Sequence[NumberedEntry], leaf_id: str | None, leaf_line: int) -> None:
    """Ids of one shape and unique; each parent and each entry named on an earlier line
    (so no cycle and no dangling link), or for `SELF_LINKS` the entry itself; the leaf
    one of the entries (`leaf_line` is where the file names it)."""
    seen: set[str] = set()
    for numbered in entries:
        entry, number = numbered.entry, numbered.line
        check_id(entry.id, "id", number)
        if entry.id in seen:
            raise SessionFileRefused(number, f"id {entry.id!r} is used by an earlier entry")
        links = [("parent_id", entry.parent_id)] if entry.parent_id is not None else []
        for link, target in [*links, *references(entry)]:
            check_id(target, link, number)
            if target == entry.id and link in SELF_LINKS:
                continue
            if target not in seen:
                raise SessionFileRefused(
                    number, f"{link} {target!r} is not the id of an entry on an earlier line"
                )
        if isinstance(entry, SessionInfoEntry) and len(entry.name) > MAX_NAME_CHARS:
            raise SessionFileRefused(number, f"the session name is over {MAX_NAME_CHARS} chars")
        seen.add(entry.id)
    if leaf_id is not None and leaf_id not in seen:
        raise SessionFileRefused(leaf_line, f"the leaf {leaf_id!r} is none of the file's entries")


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ImportNote(BaseModel):
    """One thing an import did not take as it was: what, and on how many entries or
    blocks. Reported with the import (the CLI prints them; the API returns them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["dropped", "custom", "changed"]
    """`dropped`: not kept at all; `custom`: kept as custom entries (stored and exported,
    never sent to the model); `changed`: kept with another meaning or value here."""
    what: str
    count: int = Field(ge=1)

    def text(self) -> str:
        label = {"dropped": "dropped", "custom": "kept as custom", "changed": "changed"}
        return f"{label[self.kind]}: {self.what} ({self.count})"


@dataclass(frozen=True)
class SessionFile:
    """A file read and checked: what an import stores."""

    kind: Literal["duragent", "pi"]
    source_id: str
    """The session's id where it came from: what `--keep-ids` keeps."""
    name: str | None
    config: SessionConfig | None
    """None: the file has none (pi's); the importing deployment's defaults apply."""
    leaf_id: str | None
    entries: list[NumberedEntry]
    model: str | None = None
    """For a file without a config (pi's): the model its leaf's path resumes with there,
    which the new session's config takes."""
    notes: list[ImportNote] = field(default_factory=list)
    """What of the file was dropped, kept as custom entries or changed (pi's files)."""
    created_at: int | None = None
    """When the session was made where it came from (epoch ms; None: the file does not
    say): a session imported under the file's ids keeps it."""
