"""The FastAPI application (docs/SPEC.md's endpoints), over the Python client.

Every route is per session and per user: a bearer token names the user, and a session
that does not exist or belongs to someone else is a 404 either way. A client names a
workspace only inside its own area or under a root the operator allows
(`client.workspaces`), and every text it sends has one size limit (`MAX_INPUT_BYTES`),
with the request body bounded before it is read.

One rule for the store: a route that reads or writes it is `async def` and awaits the
client (`await client.sessions.get(...)`), which runs each store call on a worker thread,
so a slow query holds up its own request only. No route calls `client.sync` (the
blocking view) or `asyncio.to_thread` for the client: a plain `def` route is one that
touches neither the store nor Temporal.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.exc import InterfaceError, OperationalError
from temporalio.service import RPCError, RPCStatusCode

from duragent.api.agui_mount import AGUI_PATH, AGUI_TOO_LARGE, MAX_AGUI_BYTES, mount_agui
from duragent.api.body_limit import BodyLimit
from duragent.api.models import (
    BudgetState,
    CreateSession,
    Cursor,
    InputResult,
    MessagesPage,
    QueueAction,
    QueueActionResult,
    QueueInput,
    RunView,
    SendInput,
    SessionState,
    SessionView,
    ShownMessage,
    StopResult,
    shown_turn_cost,
)
from duragent.api.ownership import LOCAL_USER, owned_session
from duragent.api.routes_agents import agent_routes
from duragent.api.routes_approvals import approval_routes
from duragent.api.routes_budgets import budget_routes
from duragent.api.routes_metrics import mount_metrics
from duragent.api.routes_page import page_routes
from duragent.api.routes_questions import question_routes
from duragent.api.routes_schedules import schedule_routes
from duragent.api.routes_session_files import (
    IMPORT_PATH,
    IMPORT_TOO_LARGE,
    MAX_IMPORT_BYTES,
    session_file_routes,
)
from duragent.api.routes_triggers import (
    MAX_TRIGGER_BODY_BYTES,
    TRIGGER_BODY_TOO_LARGE,
    TRIGGERS_PREFIX,
    trigger_routes,
)
from duragent.api.sse import KEEPALIVE, SSE_KEEPALIVE_S, SSE_POLL_S
from duragent.api.subagent_links import session_links
from duragent.api.web import mount_web
from duragent.client.api import DuragentClient, RunHandle
from duragent.client.errors import (
    AnswerNotRecorded,
    AnswerRefused,
    ApprovalNotRecorded,
    ApprovalRefused,
    DuragentError,
    IdsInUse,
    InputQueueFull,
    InputTooLarge,
    InvalidChange,
    InvalidPrompt,
    InvalidSchedule,
    InvalidSessionName,
    InvalidWorkspace,
    QueueItemNotFound,
    QueueItemNotPending,
    ScheduleNotFound,
    SearchAttributesMissing,
    SessionBusy,
    SessionIdle,
    SessionNotFound,
    TooManySchedules,
    TriggerNotFound,
    WorkerNotAnswering,
    WorkspaceNotAllowed,
    disk_refuses,
    store_trouble,
)
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.input import MAX_INPUT_BYTES
from duragent.domain.session_file_checks import SessionFileRefused
from duragent.domain.trigger_signatures import (
    DeliveryIdRefused,
    DeliveryReplayed,
    SignatureRefused,
    TimestampRefused,
)
from duragent.domain.triggers import TriggerRefused
from duragent.store.records import DisplayMessage, QueueItem, SessionRecord

MESSAGES_LIMIT_MAX = 500
EVENTS_LIMIT_MAX = 2000
MAX_BODY_BYTES = 2 * MAX_INPUT_BYTES + 64 * 1024
"""A request body is refused (413) past this, before more of it is read: room for one text
at the limit even when its JSON escapes double it (CJK as \\uXXXX, code's newlines and
quotes), and for the fields around it."""
_BODY_TOO_LARGE = (
    f"request body is over {MAX_BODY_BYTES} bytes; the API takes at most "
    f"{MAX_INPUT_BYTES} bytes ({MAX_INPUT_BYTES // 1024} KiB) per text"
)
logger = logging.getLogger(__name__)
_STORE_UNREACHABLE = (
    "the database is unreachable or busy; nothing was lost (runs wait for it and go on): "
    "try again in a few seconds"
)
_TEMPORAL_UNREACHABLE = (
    "the Temporal server cannot be reached or did not answer in time; nothing was lost "
    "(runs wait for it and go on): try again in a few seconds"
)
_UNAVAILABLE = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)
_STORE_DISK_FULL = (
    "the database's disk is full (or refuses writes); nothing was lost (runs wait for "
    "space and go on): free space on it, then try again"
)
# First match wins: subclasses before their bases.
_STATUS = {
    SessionNotFound: 404,
    TriggerNotFound: 404,
    SignatureRefused: 401,
    TimestampRefused: 401,
    DeliveryIdRefused: 400,
    DeliveryReplayed: 409,
    TriggerRefused: 422,  # the body, the template, the trigger's name
    ScheduleNotFound: 404,
    InvalidSchedule: 422,
    TooManySchedules: 409,
    SessionFileRefused: 422,
    InvalidSessionName: 422,
    IdsInUse: 409,
    QueueItemNotFound: 404,
    SessionBusy: 409,
    SessionIdle: 409,
    QueueItemNotPending: 409,
    InputQueueFull: 409,
    InputTooLarge: 413,
    WorkspaceNotAllowed: 403,
    InvalidWorkspace: 422,
    InvalidPrompt: 422,
    InvalidChange: 422,
    ApprovalRefused: 409,
    ApprovalNotRecorded: 503,
    AnswerRefused: 409,
    AnswerNotRecorded: 503,
    WorkerNotAnswering: 503,
    SearchAttributesMissing: 503,
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


NAME_CHARS = 60


def name_from_prompt(text: str) -> str:
    """A session's name from its first prompt: the first line that says something, cut at a
    word near `NAME_CHARS`."""
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    if len(line) <= NAME_CHARS:
        return line or "Session"
    cut = line[: NAME_CHARS - 1]
    if " " in cut[NAME_CHARS // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,.;:") + "…"


def create_app(
    client: DuragentClient, tokens: dict[str, str], workspaces: WorkspacePolicy | None = None
) -> FastAPI:
    """`tokens` maps bearer tokens to user names; `workspaces` says where users' sessions
    may work (default: from the client's settings)."""
    app = FastAPI(title="duragent", summary="A durable, steerable agent harness on Temporal")
    app.add_middleware(
        BodyLimit,
        limit=MAX_BODY_BYTES,
        detail=_BODY_TOO_LARGE,
        paths={
            IMPORT_PATH: (MAX_IMPORT_BYTES, IMPORT_TOO_LARGE),
            AGUI_PATH: (MAX_AGUI_BYTES, AGUI_TOO_LARGE),
        },
        prefixes={TRIGGERS_PREFIX: (MAX_TRIGGER_BODY_BYTES, TRIGGER_BODY_TOO_LARGE)},
    )
    app.state.tokens = dict(tokens)
    policy = workspaces or WorkspacePolicy.from_settings(client.settings)

    async def owned(session_id: str, owner: str) -> SessionRecord:
        return await owned_session(client, session_id, owner)

    @app.exception_handler(DuragentError)
    async def duragent_error(request: Request, error: DuragentError) -> JSONResponse:
        status = next((code for kind, code in _STATUS.items() if isinstance(error, kind)), 400)
        return JSONResponse({"detail": str(error)}, status_code=status)

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def store_unreachable(request: Request, error: Exception) -> JSONResponse:
        # The driver's text may name the server and the statement: it goes to the log,
        # the caller gets the reason alone.
        trouble = store_trouble(error)
        logger.warning("%s for %s %s: %s", trouble, request.method, request.url.path, error)
        detail = _STORE_DISK_FULL if disk_refuses(error) else _STORE_UNREACHABLE
        return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(RPCError)
    async def temporal_unreachable(request: Request, error: RPCError) -> JSONResponse:
        # Temporal's own words go to the log (they may name addresses), with the trace
        # when it is not an outage.
        outage = error.status in _UNAVAILABLE
        logger.warning(
            "Temporal for %s %s: %s", request.method, request.url.path, error, exc_info=not outage
        )
        if outage:
            return JSONResponse(
                {"detail": _TEMPORAL_UNREACHABLE}, status_code=503, headers={"Retry-After": "5"}
            )
        return JSONResponse({"detail": "Internal Server Error"}, status_code=500)

    @app.post("/api/sessions", status_code=201)
    async def create_session(body: CreateSession, owner: User) -> SessionView:
        session = await client.sessions.create(
            workspace=body.workspace,
            name=body.name,
            model=body.model,
            system_prompt=body.system_prompt,
            owner=owner,
            policy=policy,
            agent=body.agent,
        )
        return SessionView(session=session, phase="idle")

    @app.get("/api/sessions")
    async def list_sessions(owner: User) -> list[SessionRecord]:
        return await client.sessions.list(owner=owner, unowned=owner == LOCAL_USER)

    @app.get("/api/sessions/{session_id}")
    async def get_session(session_id: str, owner: User) -> SessionView:
        session = await owned(session_id, owner)
        return SessionView(session=session, phase=await client.sessions.phase(session_id))

    @app.post("/api/sessions/{session_id}/input")
    async def send_input(session_id: str, body: SendInput, owner: User) -> InputResult:
        session = await owned(session_id, owner)
        sent = await client.inputs.send(
            session_id, body.text, guidance=body.guidance, intent=body.intent
        )
        if isinstance(sent, RunHandle):
            if session.name is None and session.leaf_id is None:
                # A new session is named after its first prompt (a rename changes it): a
                # write the run holds and stores at its first save point, so the answer
                # never waits for a worker.
                await client.sessions.rename(session_id, name_from_prompt(body.text))
            return InputResult(action="started", run_id=sent.run_id)
        return InputResult(action="queued", item=sent)

    def shown(messages: list[DisplayMessage]) -> list[ShownMessage]:
        offline = functools.cache(client.settings.offline_for)  # per model, once a page
        return [
            ShownMessage.model_construct(
                **dict(m), turn_cost=shown_turn_cost(m.message, client.prices, offline)
            )
            for m in messages
        ]

    @app.get("/api/sessions/{session_id}/state")
    async def state(
        session_id: str,
        owner: User,
        messages_after: Annotated[Cursor | None, Query()] = None,
        events_after: Annotated[Cursor | None, Query()] = None,
        messages_limit: Annotated[int, Query(ge=1, le=MESSAGES_LIMIT_MAX)] = 200,
        events_limit: Annotated[int, Query(ge=1, le=EVENTS_LIMIT_MAX)] = 500,
    ) -> SessionState:
        """A page of display messages and one of run events (each also bounded to about
        1 MB), with the run and the pending queue. Without a cursor a list holds its
        newest items; with one, the items after it. Follow `*_cursor` while `*_more`."""
        session = await owned(session_id, owner)
        page = await client.display.page(
            session_id,
            messages_after=messages_after,
            messages_limit=messages_limit,
            events_after=events_after,
            events_limit=events_limit,
        )
        latest = page.latest_run
        status = await client.sessions.status(session_id)
        phase = status.phase
        # Asked only where there is one to show: it costs the run a query.
        run_budget = status.run is not None and status.run.budget is not None
        budgeted = session.config.budget is not None or run_budget or phase == "awaiting_budget"
        return SessionState(
            messages=shown(page.messages),
            activity_events=page.events,
            run=RunView(
                phase=status.phase,
                awaiting_host=status.awaiting_host,
                latest=latest,
                cost=page.costs.of_run(latest.run_id) if latest else None,
            ),
            session_cost=page.costs.session,
            input_queue=page.input_queue,
            messages_cursor=page.messages[-1].seq if page.messages else messages_after or 0,
            events_cursor=page.events[-1].seq if page.events else events_after or 0,
            messages_more=page.messages_more,
            events_more=page.events_more,
            messages_earlier=page.messages_earlier,
            links=await session_links(client, session),
            budget=BudgetState.of(await client.budgets.get(session_id)) if budgeted else None,
        )

    @app.get("/api/sessions/{session_id}/messages")
    async def messages(
        session_id: str,
        owner: User,
        before: Annotated[Cursor | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=MESSAGES_LIMIT_MAX)] = 200,
    ) -> MessagesPage:
        """The page of display messages just before `before` (the newest page without
        it), oldest first, bounded in count and to about 1 MB."""
        await owned(session_id, owner)
        page, earlier = await client.display.messages_before(session_id, before, limit=limit)
        return MessagesPage(messages=shown(page), earlier=earlier)

    @app.post("/api/sessions/{session_id}/input-queue", status_code=201)
    async def add_input(session_id: str, body: QueueInput, owner: User) -> QueueItem:
        await owned(session_id, owner)
        if body.kind == "guidance":
            return await client.inputs.guide_text(session_id, body.text, intent=body.intent)
        return await client.inputs.next_turn(session_id, body.text)

    @app.get("/api/sessions/{session_id}/input-queue")
    async def list_input(
        session_id: str, owner: User, status: str | None = "pending"
    ) -> list[QueueItem]:
        await owned(session_id, owner)
        return await client.inputs.queue(session_id, status=status)

    @app.get("/api/sessions/{session_id}/input-queue/{item_id}")
    async def get_input(session_id: str, item_id: str, owner: User) -> QueueItem:
        await owned(session_id, owner)
        return await client.inputs.item(session_id, item_id)

    @app.patch("/api/sessions/{session_id}/input-queue/{item_id}")
    async def act_on_input(
        session_id: str, item_id: str, body: QueueAction, owner: User
    ) -> QueueActionResult:
        await owned(session_id, owner)
        if body.action == "edit":
            text = await client.inputs.edit(session_id, item_id)
            item = await client.inputs.item(session_id, item_id)
            return QueueActionResult(item=item, text=text)
        item = await client.inputs.guide(session_id, item_id, intent=body.intent)
        return QueueActionResult(item=item)

    @app.delete("/api/sessions/{session_id}/input-queue/{item_id}", status_code=204)
    async def delete_input(session_id: str, item_id: str, owner: User) -> Response:
        await owned(session_id, owner)
        await client.inputs.delete(session_id, item_id)
        return Response(status_code=204)

    @app.post("/api/sessions/{session_id}/stop")
    async def stop(session_id: str, owner: User) -> StopResult:
        await owned(session_id, owner)
        result = await client.runs.abort(session_id)
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
        after: Annotated[Cursor, Query()] = 0,
        last_event_id: Annotated[Cursor | None, Header()] = None,
    ) -> StreamingResponse:
        """Server-Sent Events of the session's run events after a cursor: `Last-Event-ID`
        (what a reconnecting browser sends) or else `after`. Each event's `id:` is its seq."""
        await owned(session_id, owner)
        cursor = last_event_id if last_event_id is not None else after
        return StreamingResponse(
            _sse(client, session_id, cursor),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    app.include_router(page_routes(client, current_user))
    app.include_router(agent_routes(client, current_user))
    app.include_router(approval_routes(client, current_user))
    app.include_router(question_routes(client, current_user))
    app.include_router(budget_routes(client, current_user))
    app.include_router(session_file_routes(client, current_user, policy))
    app.include_router(trigger_routes(client, current_user, policy))
    mount_agui(app, client, current_user)  # POST /api/agui with the `agui` extra
    app.include_router(schedule_routes(client, current_user))
    mount_metrics(app, client)  # GET /metrics when DURAGENT_API_METRICS is on
    mount_web(app)  # the web page, at /
    return app


async def _sse(client: DuragentClient, session_id: str, cursor: int) -> AsyncIterator[str]:
    idle = 0.0
    async for batch in client.events.batches(session_id, after=cursor, poll_s=SSE_POLL_S):
        for event in batch:
            data = json.dumps(event.model_dump(mode="json"))
            yield f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"
        if batch:
            idle = 0.0
            continue
        idle += SSE_POLL_S
        if idle >= SSE_KEEPALIVE_S:
            idle = 0.0
            yield KEEPALIVE
