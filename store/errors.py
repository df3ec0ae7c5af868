"""Errors the store raises for things a caller asked for that are not there, and what a
database error says about the store, in words."""

from __future__ import annotations


class SessionNotFound(LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} does not exist")
        self.session_id = session_id


class EntryNotFound(LookupError):
    def __init__(self, entry_id: str) -> None:
        super().__init__(f"session entry {entry_id!r} does not exist")
        self.entry_id = entry_id


class EntrySaved(RuntimeError):
    """A message staged for an entry the session has stored already: whoever stages it is
    a stale attempt (taken for lost and continued after its turn was saved without it),
    and must do nothing more for that turn."""

    def __init__(self, entry_id: str) -> None:
        super().__init__(
            f"session entry {entry_id!r} was saved already: this attempt is stale (its "
            "worker was taken for lost, and the run went on without it), so it stops here"
        )
        self.entry_id = entry_id


_DISK_REFUSES = ("database or disk is full", "disk i/o error", "no space left on device")
"""SQLite's full disk (SQLITE_FULL) and refused write (SQLITE_IOERR), PostgreSQL's
DiskFull ("could not extend file ...: No space left on device")."""


def disk_refuses(error: BaseException) -> bool:
    """Whether a database error (a driver's, or SQLAlchemy's around it) says the store's
    disk is full or refuses writes, rather than the database being unreachable or busy."""
    text = str(getattr(error, "orig", None) or error).lower()
    return any(words in text for words in _DISK_REFUSES)


def store_trouble(error: BaseException) -> str:
    """What is wrong with the store, for a log line: its disk, or its reach."""
    return "store's disk is full" if disk_refuses(error) else "store unavailable"
