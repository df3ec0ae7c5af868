"""Schedules over HTTP: a session's prompts on a timetable (`client.schedules`).

A schedule belongs to its session's owner: another user's schedule, like another user's
session, is not found (404). Bad timetables, time zones and prompts are 422, a user with
the most schedules one may have gets 409.
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field

from duragent.api.ownership import LOCAL_USER, owned_schedule, owned_session
from duragent.client.api import DuragentClient
from duragent.client.schedules import MAX_CRON
from duragent.domain.schedules import BusyPolicy, ScheduleView

MAX_TEXT_CHARS = 200
"""A cron expression, an interval, a time zone or a note: short by nature."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddSchedule(_Body):
    prompt: str = Field(min_length=1)
    """Bounded by the client's one size limit, like every text sent to a session."""
    cron: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)]] = Field(
        default_factory=list, max_length=MAX_CRON
    )
    every: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    """`1h`, `30m`, `90s`, `1h30m` (`domain.schedules.parse_every`); or `cron`."""
    timezone: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    busy: BusyPolicy = "queue"
    new_session: bool = False
    paused: bool = False


class Note(_Body):
    note: str = Field(default="", max_length=MAX_TEXT_CHARS)


def schedule_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = APIRouter(prefix="/api")
    User = Annotated[str, Depends(current_user)]

    @router.post("/sessions/{session_id}/schedules", status_code=201)
    async def add_schedule(session_id: str, body: AddSchedule, owner: User) -> ScheduleView:
        await owned_session(client, session_id, owner)
        return await client.schedules.add(
            session_id,
            body.prompt,
            cron=body.cron,
            every=body.every,
            timezone=body.timezone,
            busy=body.busy,
            new_session=body.new_session,
            owner=owner,
            paused=body.paused,
        )

    @router.get("/sessions/{session_id}/schedules")
    async def session_schedules(session_id: str, owner: User) -> list[ScheduleView]:
        await owned_session(client, session_id, owner)
        return await client.schedules.list(session_id=session_id)

    @router.get("/schedules")
    async def my_schedules(owner: User) -> list[ScheduleView]:
        """The user's schedules (the operator's: those made from the command line too)."""
        mine = await client.schedules.list(owner=owner)
        if owner == LOCAL_USER:
            mine += await client.schedules.list(owner=None)
        return mine

    @router.get("/schedules/{schedule_id}")
    async def get_schedule(schedule_id: str, owner: User) -> ScheduleView:
        """The schedule, with what each of its recent firings did."""
        await owned_schedule(client, schedule_id, owner)
        return await client.schedules.get(schedule_id, outcomes=True)

    @router.post("/schedules/{schedule_id}/pause")
    async def pause(schedule_id: str, owner: User, body: Note | None = None) -> ScheduleView:
        await owned_schedule(client, schedule_id, owner)
        return await client.schedules.pause(schedule_id, body.note if body else "")

    @router.post("/schedules/{schedule_id}/resume")
    async def resume(schedule_id: str, owner: User, body: Note | None = None) -> ScheduleView:
        await owned_schedule(client, schedule_id, owner)
        return await client.schedules.resume(schedule_id, body.note if body else "")

    @router.post("/schedules/{schedule_id}/trigger")
    async def trigger(schedule_id: str, owner: User) -> ScheduleView:
        await owned_schedule(client, schedule_id, owner)
        return await client.schedules.trigger(schedule_id)

    @router.delete("/schedules/{schedule_id}", status_code=204)
    async def delete(schedule_id: str, owner: User) -> Response:
        await owned_schedule(client, schedule_id, owner)
        await client.schedules.delete(schedule_id)
        return Response(status_code=204)

    return router
