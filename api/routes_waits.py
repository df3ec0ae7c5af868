"""What waits for a person in a session's run, over HTTP: the tool calls waiting on an
approval (`GET /api/sessions/{id}/approvals`) and the `ask_user` questions waiting on an
answer (`GET /api/sessions/{id}/questions`) are listed by one route body: the session
must be the caller's, and the run is asked what waits (503 when no worker answers)."""

# No `from __future__ import annotations`: FastAPI must see the `User` dependency in the
# route's signature as an object, not as a name to look up in this module.
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from duragent.api.ownership import owned_session
from duragent.client.api import DuragentClient

PendingT = TypeVar("PendingT", bound=BaseModel)


def waiting_router(
    client: DuragentClient,
    current_user: Callable[..., str],
    name: str,
    pending: Callable[[str], Awaitable[list[PendingT]]],
    listed_as: type[PendingT],
) -> APIRouter:
    """An `/api` router with `GET /sessions/{session_id}/<name>`: what `pending` lists for
    a session of the caller's, each item shown as `listed_as`. The kind of wait adds the
    routes that take a person's word."""
    router = APIRouter(prefix="/api")
    User = Annotated[str, Depends(current_user)]

    async def waiting(session_id: str, owner: User) -> list[PendingT]:
        await owned_session(client, session_id, owner)
        return await pending(session_id)

    router.add_api_route(
        f"/sessions/{{session_id}}/{name}",
        waiting,
        methods=["GET"],
        response_model=list[listed_as],  # type: ignore[valid-type]
        name=name,  # the operation's id in the OpenAPI document, as before
    )
    return router
