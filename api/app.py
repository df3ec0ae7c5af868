"""The FastAPI application (seed 001's endpoints), over the Python client.

Every route is per session and per user: a bearer token names the user, and a session
that does not exist or belongs to someone else is a 404 either way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.models import (
    CreateSession,
    InputResult,
    QueueAction,
    QueueActionResult,
    QueueInput,
    RunView,
    SendInput,
    SessionState,
    SessionView,
    StopResult,
)
from api.routes_page import page_routes
from api.web import mount_web
from client.api import DuragentClient, RunHandle
from client.errors import (
    DuragentError,
    InvalidChange,
    InvalidPrompt,
    QueueItemNotFound,
    QueueItemNotPending,
    SessionBusy,
    SessionIdle,
    SessionNotFound,
)
from store import display, events, runs
from store.records import QueueItem, SessionRecord

# Events reach the API through the store (workers are other processes); an indexed read
# every 20 ms keeps a streamed delta under ~35 ms from the model to the browser.
SSE_POLL_S = 0.02
SSE_KEEPALIVE_S = 15.0
_STATUS = {
    SessionNotFound: 404,
    QueueItemNotFound: 404,
    SessionBusy: 409,
    SessionIdle: 409,
    QueueItemNotPending: 409,
    InvalidPrompt: 422,
    InvalidChange: 422,
}


_bearer = HTTPBearer(auto_error=False)


def current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The user the bearer token names; 401 without a known token."""
    tokens: dict[str, str] = request.app.state.tokens
    name = tokens.get(credentials.credentials) if credentials else None
    if name is None:
        raise HTTPException(401, "a valid bearer token is required")
    return name


User = Annotated[str, Depends(current_user)]


def create_app(client: DuragentClient, tokens: dict[str, str]) -> FastAPI:
    """`tokens` maps bearer tokens to user names."""
    app = FastAPI(title="duragent", summary="A durable, steerable agent harness on Temporal")
    app.state.tokens = dict(tokens)

    def owned(session_id: str, owner: str) -> SessionRecord:
        try:
            session = client.get_session(session_id)
        except SessionNotFound:
            session = None
        if session is None or session.owner != owner:
            raise HTTPException(404, f"session {session_id!r} does not exist")
        return session

    @app.exception_handler(DuragentError)
    async def duragent_error(request: Request, error: DuragentError) -> JSONResponse:
        status = next((code for kind, code in _STATUS.items() if isinstance(error, kind)), 400)
        return JSONResponse({"detail": str(error)}, status_code=status)

    @app.post("/api/sessions", status_code=201)
    async def create_session(body: CreateSession, owner: User) -> SessionView:
        session = client.create_session(
            workspace=body.workspace,
            name=body.name,
            model=body.model,
            system_prompt=body.system_prompt,
            owner=owner,
        )
        return SessionView(session=session, phase="idle")

    @app.get("/api/sessions")
    async def list_sessions(owner: User) -> list[SessionRecord]:
        return client.list_sessions(owner=owner)

    @app.get("/api/sessions/{session_id}")
    async def get_session(session_id: str, owner: User) -> SessionView:
        session = owned(session_id, owner)
        return SessionView(session=session, phase=await client.phase(session_id))

    @app.post("/api/sessions/{session_id}/input")
    async def send_input(session_id: str, body: SendInput, owner: User) -> InputResult:
        owned(session_id, owner)
        sent = await client.send_input(session_id, body.text, guidance=body.guidance)
        if isinstance(sent, RunHandle):
            return InputResult(action="started", run_id=sent.run_id)
        return InputResult(action="queued", item=sent)

    @app.get("/api/sessions/{session_id}/state")
    async def state(
        session_id: str,
        owner: User,
        messages_after: Annotated[int, Query(ge=0)] = 0,
        events_after: Annotated[int, Query(ge=0)] = 0,
    ) -> SessionState:
        owned(session_id, owner)
        with client.db.transaction() as db:
            shown = display.list_display(db, session_id, after=messages_after)
            activity = events.read_events(db, session_id, after=events_after, limit=2000)
            latest = runs.list_runs(db, session_id, limit=1)
        return SessionState(
            messages=shown,
            activity_events=activity,
            run=RunView(phase=await client.phase(session_id), latest=latest[0] if latest else None),
            input_queue=client.queue_items(session_id),
            messages_cursor=shown[-1].seq if shown else messages_after,
            events_cursor=activity[-1].seq if activity else events_after,
        )

    @app.post("/api/sessions/{session_id}/input-queue", status_code=201)
    async def add_input(session_id: str, body: QueueInput, owner: User) -> QueueItem:
        owned(session_id, owner)
        item = client.next_turn(session_id, body.text)
        if body.kind == "guidance":
            item = await client.guide(session_id, item.id, intent=body.intent)
        return item

    @app.get("/api/sessions/{session_id}/input-queue")
    async def list_input(
        session_id: str, owner: User, status: str | None = "pending"
    ) -> list[QueueItem]:
        owned(session_id, owner)
        return client.queue_items(session_id, status=status)

    @app.get("/api/sessions/{session_id}/input-queue/{item_id}")
    async def get_input(session_id: str, item_id: str, owner: User) -> QueueItem:
        owned(session_id, owner)
        return client.queue_item(session_id, item_id)

    @app.patch("/api/sessions/{session_id}/input-queue/{item_id}")
    async def act_on_input(
        session_id: str, item_id: str, body: QueueAction, owner: User
    ) -> QueueActionResult:
        owned(session_id, owner)
        if body.action == "edit":
            text = client.edit_queue_item(session_id, item_id)
            return QueueActionResult(item=client.queue_item(session_id, item_id), text=text)
        item = await client.guide(session_id, item_id, intent=body.intent)
        return QueueActionResult(item=item)

    @app.delete("/api/sessions/{session_id}/input-queue/{item_id}", status_code=204)
    async def delete_input(session_id: str, item_id: str, owner: User) -> Response:
        owned(session_id, owner)
        client.delete_queue_item(session_id, item_id)
        return Response(status_code=204)

    @app.post("/api/sessions/{session_id}/stop")
    async def stop(session_id: str, owner: User) -> StopResult:
        owned(session_id, owner)
        result = await client.abort(session_id)
        return StopResult(
            run_id=result.run_id,
            status=result.status,
            cancelled_inputs=result.cancelled_inputs,
            cleared_steering=result.cleared_steering,
            cleared_follow_ups=result.cleared_follow_ups,
        )

    @app.get("/api/sessions/{session_id}/events")
    async def event_stream(
        session_id: str,
        owner: User,
        after: Annotated[int, Query(ge=0)] = 0,
        last_event_id: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        """Server-Sent Events of the session's run events, from the cursor in
        `Last-Event-ID` (a reconnecting browser sends it) or `after`."""
        owned(session_id, owner)
        cursor = int(last_event_id) if last_event_id and last_event_id.isdigit() else after
        return StreamingResponse(
            _sse(client, session_id, cursor),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    app.include_router(page_routes(client, current_user))
    mount_web(app)  # the web page, at /
    return app


async def _sse(client: DuragentClient, session_id: str, cursor: int) -> AsyncIterator[str]:
    idle = 0.0
    while True:
        with client.db.transaction() as db:
            batch = events.read_events(db, session_id, after=cursor)
        for event in batch:
            cursor = event.seq
            data = json.dumps(event.model_dump(mode="json"))
            yield f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"
        if batch:
            idle = 0.0
            continue
        await asyncio.sleep(SSE_POLL_S)
        idle += SSE_POLL_S
        if idle >= SSE_KEEPALIVE_S:
            idle = 0.0
            yield ": keep-alive\n\n"
