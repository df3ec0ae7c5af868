"""Errors the store raises for things a caller asked for that are not there."""

from __future__ import annotations


class SessionNotFound(LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} does not exist")
        self.session_id = session_id


class EntryNotFound(LookupError):
    def __init__(self, entry_id: str) -> None:
        super().__init__(f"session entry {entry_id!r} does not exist")
        self.entry_id = entry_id
