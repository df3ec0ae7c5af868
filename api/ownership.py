"""A route names only sessions (and triggers) its user owns; any other is "not found"
(never "forbidden", which would tell that it exists).

Sessions started from the command line (`duragent run`) have no owner: they are the
machine's operator's, the user `LOCAL_USER` (the one of the token `duragent serve` makes
up when `DURAGENT_API_TOKENS` names none). Other users see only their own sessions.
Triggers made with `duragent trigger` likewise have no owner."""

from __future__ import annotations

from typing import Protocol

from fastapi import HTTPException

from duragent.client.api import DuragentClient
from duragent.client.errors import ScheduleNotFound, SessionNotFound
from duragent.store.records import ScheduleRecord, SessionRecord

LOCAL_USER = "default"


class Owned(Protocol):
    """A session, a trigger: anything with an owner (None: the operator's)."""

    @property
    def owner(self) -> str | None: ...


def owns(user: str, thing: Owned) -> bool:
    return thing.owner == user or (thing.owner is None and user == LOCAL_USER)


async def owned_session(client: DuragentClient, session_id: str, owner: str) -> SessionRecord:
    """The session, if `owner` owns it; a 404 otherwise."""
    try:
        session = await client.sessions.get(session_id)
    except SessionNotFound:
        session = None
    if session is None or not owns(owner, session):
        raise HTTPException(404, f"session {session_id!r} does not exist")
    return session


async def owned_schedule(client: DuragentClient, schedule_id: str, owner: str) -> ScheduleRecord:
    """The schedule, if `owner` owns its session; a 404 otherwise (as for a session)."""
    try:
        record: ScheduleRecord | None = await client.schedules.record(schedule_id)
        session = await client.sessions.get(record.session_id) if record else None
    except (ScheduleNotFound, SessionNotFound):
        record = session = None
    if record is None or session is None or not owns(owner, session):
        raise HTTPException(404, f"schedule {schedule_id!r} does not exist")
    return record
