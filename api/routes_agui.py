"""The AG-UI endpoint: run and watch a session from an AG-UI front-end.

`POST /api/agui` takes AG-UI's `RunAgentInput` (its `threadId` is the session's id) and
answers with the AG-UI events of one AG-UI run, as Server-Sent Events: its last user
message goes to the session as the page's composer sends it (an idle session starts a
run; a busy one queues it, and the run that takes it, which starts when the busy one
ends, answers it: the AG-UI run follows on into that run and ends with it), or its
`resume` answers what the run waits for (`api/agui_waits.py`; an entry for an interrupt
that no longer waits is a warning, and the run goes on). `GET /api/sessions/{id}/agui`
watches the run in progress (or the next one) the same way, without sending anything.
Which run's end ends an AG-UI run: `api/agui_follow.py`.

Every event translated from the stored event `seq` is written together, the last of
them with `id: seq`: a dropped stream resumes with `Last-Event-ID` (or `?after=`) on the
GET, exactly as the session's `/events` stream does, and the resumed stream is a whole
AG-UI run of its own (it opens with `RUN_STARTED` and the state).
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, TextPart, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from duragent.api.agui_events import AguiRun, HeaderState
from duragent.api.agui_follow import ChainFollow, Follow, InputFollow, RunFollow
from duragent.api.agui_messages import conversation
from duragent.api.agui_mount import AGUI_PATH, AGUI_WATCH_PATH
from duragent.api.agui_waits import WAIT_PHASES, resume, waiting_interrupts
from duragent.api.models import Cursor
from duragent.api.ownership import owned_session
from duragent.api.sse import KEEPALIVE, SSE_KEEPALIVE_S, SSE_POLL_S
from duragent.client.api import DuragentClient
from duragent.client.errors import DuragentError, InvalidPrompt
from duragent.client.run_control import RunHandle

_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
logger = logging.getLogger(__name__)


def agui_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = APIRouter()
    User = Annotated[str, Depends(current_user)]

    @router.post(AGUI_PATH)
    async def run_agent(body: RunAgentInput, owner: User) -> StreamingResponse:
        """Run the session `threadId` names: its last user message as input, or `resume`
        answering the interrupts that ended the previous AG-UI run."""
        session_id = body.thread_id
        await owned_session(client, session_id, owner)
        state = await header_state(client, session_id)
        # The cursor is read first, so the stream misses nothing the input causes; a
        # resume goes on from where the interrupted AG-UI run stopped.
        cursor = await client.events.cursor(session_id)
        held = list(body.messages)
        follow: Follow
        if body.resume:
            run = AguiRun(session_id, state, run_id=body.run_id, held=held)
            resumed = await resume(client, session_id, body.resume, owner)
            cursor = min([cursor, *resumed.positions])
            opened = [*run.start(None), *run.warn(resumed.ignored)]
            follow = ChainFollow()  # the run it answered, and the runs that run starts
        else:
            text = last_user_text(body)
            run = AguiRun(session_id, state, run_id=body.run_id, held=held, sent=held[-1])
            sent = await client.inputs.send(session_id, text)
            opened = run.start(None)
            # The run it started, or the one that takes it from the queue (the busy run
            # is told on the way: the transcript has its reply before this message).
            follow = RunFollow(sent.run_id) if isinstance(sent, RunHandle) else InputFollow(sent.id)
        return StreamingResponse(
            agui_stream(
                client,
                session_id,
                run,
                cursor,
                follow,
                opened=opened,
                idle_ends=bool(body.resume),
            ),
            media_type=EventEncoder().get_content_type(),
            headers=_HEADERS,
        )

    @router.get(AGUI_WATCH_PATH)
    async def watch(
        session_id: str,
        owner: User,
        after: Annotated[Cursor | None, Query()] = None,
        last_event_id: Annotated[Cursor | None, Header()] = None,
    ) -> StreamingResponse:
        """The AG-UI run of the session's run after a cursor (`Last-Event-ID`, else
        `after`, else now): the run in progress, or the next one."""
        await owned_session(client, session_id, owner)
        cursor = last_event_id if last_event_id is not None else after
        if cursor is None:
            cursor = await client.events.cursor(session_id)
        run = AguiRun(session_id, await header_state(client, session_id))
        return StreamingResponse(
            agui_stream(client, session_id, run, cursor, ChainFollow()),
            media_type=EventEncoder().get_content_type(),
            headers=_HEADERS,
        )

    return router


def last_user_text(body: RunAgentInput) -> str:
    """The text of the input's last message, which must be the user's."""
    message = body.messages[-1] if body.messages else None
    if not isinstance(message, UserMessage):
        raise InvalidPrompt("an AG-UI run needs a user message last in `messages`, or `resume`")
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(part.text for part in content if isinstance(part, TextPart))
    if not text.strip():
        raise InvalidPrompt("the last user message has no text (only text is taken)")
    return text


async def header_state(client: DuragentClient, session_id: str) -> HeaderState:
    """The run header's state now: the session's phase and model, and its run in progress."""
    status = await client.sessions.status(session_id)
    runs = await client.runs.list(session_id)
    latest = runs[0] if runs and runs[0].status == "running" else None
    return HeaderState(
        phase=status.phase,
        run_id=latest.run_id if latest else None,
        turn=latest.turns if latest else 0,
        usage=latest.usage if latest else HeaderState().usage,
        model=status.config.model,
    )


async def agui_stream(
    client: DuragentClient,
    session_id: str,
    run: AguiRun,
    cursor: int,
    follow: Follow,
    *,
    opened: list[BaseEvent] | None = None,
    idle_ends: bool = False,
) -> AsyncIterator[str]:
    """The AG-UI run's events from the stored events after `cursor`, until it finishes
    with the run's end `follow` names, or a client that goes away ends it.

    Once the stored events are caught up with, a run in progress is opened if no event of
    it came yet, and a run that waits for a person finishes the AG-UI run at once; with
    `idle_ends` (a resume), so does one that finds no run in progress once all that run
    did is told: nothing more of it will come."""
    if opened:
        yield frame(opened)
    caught_up = False
    idle_checked = False
    position = cursor
    quiet = 0.0
    try:
        async for batch in client.events.batches(session_id, after=cursor, poll_s=SSE_POLL_S):
            for event in batch:
                follow.observe(event)
                ending = None
                if event.type == "agent_end" and not run.finished:
                    ending = await follow.at_end(client, session_id, event)
                out = run.translate(event, ending)
                position = event.seq
                if run.waiting:
                    waits = await waiting_interrupts(client, session_id, run.waiting)
                    out += run.interrupt(waits, position)
                out += await restated(client, session_id, run)
                yield frame(out, event.seq)
                if run.finished:
                    return
            if run.started and (out := await followed(client, session_id, run, follow, position)):
                yield frame(out)
                if run.finished:
                    return
            if batch:
                quiet = 0.0
                idle_checked = False
                continue
            if not caught_up:
                caught_up = True
                out = await join(client, session_id, run, position)
                if out:
                    yield frame(out)
                if run.finished:
                    return
            if idle_ends and not idle_checked and run.started and not run.holding:
                idle_checked = True  # again only once more events came
                out = await idle_end(client, session_id, run, position)
                if out:
                    yield frame(out)
                if run.finished:
                    return
            quiet += SSE_POLL_S
            if quiet >= SSE_KEEPALIVE_S:
                quiet = 0.0
                yield KEEPALIVE
    except DuragentError as err:
        logger.info("AG-UI stream of session %s ended: %s", session_id, err)
        yield frame([RunErrorEvent(message=str(err), code=type(err).__name__)])
    except (asyncio.CancelledError, GeneratorExit):
        # The client went away (the server cancels or closes its response): the AG-UI run
        # ends here. Its events are stored; a watch from the last id it got tells the rest.
        logger.info(
            "AG-UI stream of session %s ended: the client left (or the server stops)", session_id
        )
        raise


async def followed(
    client: DuragentClient, session_id: str, run: AguiRun, follow: Follow, position: int
) -> list[BaseEvent]:
    """The AG-UI run's end that no event tells: the input it follows was cancelled, or the
    run whose end it held started none after all."""
    ending = await follow.check(client, session_id, position)
    if ending is None:
        return []
    if ending.kind == "cancelled":
        out = run.cancel_input(ending)
    elif run.holding:
        out = run.finish_held()
    else:
        return []
    return [*out, *await restated(client, session_id, run)]


async def join(
    client: DuragentClient, session_id: str, run: AguiRun, position: int
) -> list[BaseEvent]:
    """Open the session's run in progress (when none of its events came yet) and, when it
    waits for a person, finish the AG-UI run with what it waits for: once every stored
    event is told (`position`), else the phase change still to come tells the wait, and
    the client gets the state it says."""
    state = await header_state(client, session_id)
    out: list[BaseEvent] = []
    if not run.started and state.run_id is not None:
        run.state = state
        out += run.start(state.run_id)
    if (
        run.started
        and state.phase in WAIT_PHASES
        and await client.events.cursor(session_id) <= position
    ):
        out += run.interrupt(await waiting_interrupts(client, session_id, state.phase), position)
    return [*out, *await restated(client, session_id, run)]


async def idle_end(
    client: DuragentClient, session_id: str, run: AguiRun, position: int
) -> list[BaseEvent]:
    """Finish the AG-UI run when no run is in progress and every stored event up to now
    is told (`position`): a run that ended since the last batch was read still has its
    events, its end among them, to tell first."""
    runs = await client.runs.list(session_id)
    if runs and runs[0].status == "running":
        return []
    if await client.events.cursor(session_id) > position:
        return []
    return [*run.finish_idle(), *await restated(client, session_id, run)]


async def restated(client: DuragentClient, session_id: str, run: AguiRun) -> list[BaseEvent]:
    """The conversation, when the AG-UI run owes it to the client (and the run's end, when
    that follows it)."""
    if not run.wants_messages:
        return []
    messages, queued = await conversation(client, session_id)
    return run.with_messages(messages, queued)


def frame(events: list[BaseEvent], seq: int | None = None) -> str:
    """The events as Server-Sent Events, the last one carrying `id: seq` when given."""
    encoder = EventEncoder()
    parts = [encoder.encode(event) for event in events]
    if parts and seq is not None:
        parts[-1] = f"id: {seq}\n{parts[-1]}"
    return "".join(parts)
