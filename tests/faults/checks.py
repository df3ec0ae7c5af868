"""What every fault case asserts once the dust settles, and the waits they share.

`assert_session_sound` is the one verdict: the runs ended as expected (one agent_start and
one agent_end each), every entry is stored once on a single chain, tool calls and results
pair up, the display history matches the transcript, the model never got a request it
rejected, and each queued message (steer, follow-up) was delivered exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from support import Stack, assert_valid_pairing, eventually, transcript_roles
from support import user_texts as user_texts  # the fault tests read it from here
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import (
    AgentMessage,
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
    text_of,
)
from duragent.domain.runs import RunStatus, session_workflow_id
from duragent.offline_model.server import RecordedRequest
from duragent.store import events
from duragent.store.records import StoredEvent


def expect(condition: bool, message: str) -> None:
    """An assertion whose message says what was seen."""
    assert condition, message


# ----------------------------------------------------------------------------- reading


def run_events(stack: Stack, session_id: str) -> list[StoredEvent]:
    """Every stored run event of the session, in order (all pages, not just the first)."""
    found: list[StoredEvent] = []
    while True:
        with stack.db.transaction() as db:
            page = events.read_events(db, session_id, after=found[-1].seq if found else 0)
        if not page:
            return found
        found += page


def events_of(
    stack: Stack, session_id: str, event_type: str, /, **match: object
) -> list[dict[str, Any]]:
    """The payloads of the session's events of `event_type` whose fields equal `match`."""
    return [
        e.payload
        for e in run_events(stack, session_id)
        if e.type == event_type and all(e.payload.get(k) == v for k, v in match.items())
    ]


async def wait_for_event(
    stack: Stack, session_id: str, event_type: str, /, *, timeout: float = 30.0, **match: object
) -> None:
    """Wait until an event of `event_type` whose fields equal `match` is stored."""
    await eventually(
        lambda: bool(events_of(stack, session_id, event_type, **match)),
        timeout=timeout,
        interval=0.02,
    )


def model_requests(stack: Stack, session_id: str) -> list[RecordedRequest]:
    """The Messages API requests the model received for the session (not token counts)."""
    return [r for r in stack.model.requests_for(session_id) if r.path == "/v1/messages"]


def tool_results(path: Sequence[SessionEntry]) -> dict[str, ToolResultMessage]:
    """The tool results on a path, by tool name (the cases call each tool once)."""
    return {
        e.message.tool_name: e.message
        for e in path
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    }


async def history_types(stack: Stack, session_id: str) -> list[EventType.ValueType]:
    """The event types of the session's current workflow execution, in order."""
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session_id))
    history = await handle.fetch_history()
    found: list[HistoryEvent] = list(history.events)
    return [e.event_type for e in found]


async def activity_attempts(stack: Stack, session_id: str) -> dict[str, int]:
    """Activity id -> the attempt that completed it (or was last started), from history."""
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session_id))
    history = await handle.fetch_history()
    scheduled: dict[int, str] = {}
    attempts: dict[str, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activity_id = event.activity_task_scheduled_event_attributes.activity_id
            scheduled[event.event_id] = activity_id
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            attempts[scheduled[started.scheduled_event_id]] = started.attempt
    return attempts


# ------------------------------------------------------------------------------ faults


def database_file(stack: Stack) -> Path:
    """The stack's SQLite file."""
    return Path(stack.settings.database_url.removeprefix("sqlite:///"))


@asynccontextmanager
async def database_locked(database: Path) -> AsyncIterator[sqlite3.Connection]:
    """Hold SQLite's write lock on `database` (another connection in `BEGIN EXCLUSIVE`)
    for as long as the block runs: every writer waits, then fails with "locked". What the
    block executes on the yielded connection is committed when the lock is let go."""
    connection = sqlite3.connect(
        database, timeout=10, isolation_level=None, check_same_thread=False
    )
    try:
        # In a thread: if a writer holds the lock right now, wait without blocking the loop.
        await asyncio.to_thread(connection.execute, "BEGIN EXCLUSIVE")
        try:
            yield connection
        finally:
            connection.execute("COMMIT")
    finally:
        connection.close()


async def hold_lock(database: Path, seconds: float) -> None:
    """Lock the database for `seconds`."""
    async with database_locked(database):
        await asyncio.sleep(seconds)


RUN_END_REFUSED = "fault injected: the database refuses to end the run"
SAVE_POINT_REFUSED = "fault injected: the database refuses the save point"
_REFUSALS = {
    # finish_run, the run's last store write (a local activity).
    RUN_END_REFUSED: (
        "fault_refuse_run_end",
        "BEFORE UPDATE ON run_states WHEN NEW.ended_at IS NOT NULL AND OLD.ended_at IS NULL",
    ),
    # The save point a model_turn activity commits before its model call.
    SAVE_POINT_REFUSED: (
        "fault_refuse_save_point",
        "BEFORE INSERT ON run_events WHEN NEW.type = 'save_point'",
    ),
}


def refuse(database: Path, refusal: str) -> None:
    """From now on the store write `refusal` names fails, as a database that rejects
    writes would: a trigger aborts its transaction. Unlike a lock, this holds a run at
    that write for as long as a test needs, with no race."""
    name, when = _REFUSALS[refusal]
    with contextlib.closing(sqlite3.connect(database, timeout=10)) as connection:
        connection.execute(
            f"CREATE TRIGGER {name} {when} BEGIN SELECT RAISE(ABORT, '{refusal}'); END"
        )
        connection.commit()


def allow(connection: sqlite3.Connection, refusal: str) -> None:
    """Undo `refuse` (on a connection: commit it, or let `database_locked` do it)."""
    connection.execute(f"DROP TRIGGER IF EXISTS {_REFUSALS[refusal][0]}")


def refuse_run_end(database: Path) -> None:
    refuse(database, RUN_END_REFUSED)


def allow_run_end(connection: sqlite3.Connection) -> None:
    allow(connection, RUN_END_REFUSED)


def worker_log(stack: Stack, index: int = 0) -> str:
    """What the `index`-th worker process spawned by the stack has printed so far."""
    return (stack.settings.home / f"worker-{index}.log").read_text(errors="replace")


async def finish_refused(stack: Stack, session_id: str, worker: int = 0) -> None:
    """Wait until finish_run has failed at least once on `refuse_run_end` (so the run is in
    its finish, retrying) and check it has not ended."""
    await refused(stack, RUN_END_REFUSED, worker)
    assert not events_of(stack, session_id, "agent_end")


async def refused(stack: Stack, refusal: str, worker: int = 0) -> None:
    """Wait until the `worker`-th worker has met `refusal` at least once."""
    await eventually(lambda: refusal in worker_log(stack, worker), timeout=30)


# ----------------------------------------------------------------------------- verdict


def assert_session_sound(
    stack: Stack,
    session_id: str,
    *,
    status: RunStatus = "completed",
    queued: Sequence[str] = (),
) -> list[SessionEntry]:
    """The session after its run(s): sound in every way a fault could break. Returns the
    path. `status` is what the latest run must have ended with; `queued` the texts of the
    steering and follow-up messages sent during the run."""
    # Every run ended, each with exactly one agent_start and one agent_end.
    records = stack.client.sync.runs.list(session_id)
    assert records, "no run was recorded"
    latest = max(records, key=lambda r: r.started_at)
    assert latest.status == status, f"run {latest.run_id} is {latest.status}: {latest.error}"
    all_events = run_events(stack, session_id)
    for record in records:
        assert record.ended_at is not None, f"run {record.run_id} never ended"
        starts = [
            e
            for e in all_events
            if e.type == "agent_start" and e.payload["run_id"] == record.run_id
        ]
        ends = [
            e for e in all_events if e.type == "agent_end" and e.payload["run_id"] == record.run_id
        ]
        assert len(starts) == 1, f"{len(starts)} agent_start events for run {record.run_id}"
        assert len(ends) == 1, f"{len(ends)} agent_end events for run {record.run_id}"
        assert ends[0].payload["status"] == record.status
        assert all(e.seq <= ends[0].seq for e in all_events if e.run_id == record.run_id), (
            "events of the run after its agent_end"
        )

    # Every entry stored once, all of them on one chain from the root to the leaf.
    stored = stack.client.sync.tree.entries(session_id)
    ids = [e.id for e in stored]
    assert len(ids) == len(set(ids)), f"entries stored twice: {ids}"
    path = stack.client.sync.tree.path(session_id)
    assert path, "the session has no entries"
    assert path[0].parent_id is None
    for parent, child in itertools.pairwise(path):
        assert child.parent_id == parent.id, f"{child.id} does not follow {parent.id}"
    assert sorted(e.id for e in path) == sorted(ids), "entries off the session's branch"
    assert_valid_pairing(path)

    # The display history is the transcript, message for message (and each compaction's
    # summary, the model call that wrote it).
    shown = stack.client.sync.display.messages(session_id)
    expected = [
        (e.id, e.message.role if isinstance(e, MessageEntry) else "custom")
        for e in path
        if isinstance(e, MessageEntry)
        or (isinstance(e, CustomMessageEntry) and e.display)
        or (isinstance(e, CompactionEntry | BranchSummaryEntry) and e.usage is not None)
    ]
    assert [(d.id, d.role) for d in shown] == expected
    assert [d.role for d in shown if d.role != "custom"] == transcript_roles(path)

    # The model (which validates requests like the real API) accepted every request, and
    # the last one carried each stored tool call and result once, in the stored order.
    requests = model_requests(stack, session_id)
    assert all(r.status != 400 for r in requests), "the model rejected a request as invalid"
    if requests:
        sent = [
            (block["type"], block.get("id") or block.get("tool_use_id"))
            for message in requests[-1].body["messages"]
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
        ]
        answered = _answered_part(path)
        kept = [
            pair
            for e in answered
            if isinstance(e, MessageEntry)
            for pair in _tool_blocks(e.message)
        ]
        assert sent == kept, f"the model saw {sent}, the session stores {kept}"

    # Each queued message: once on the path, consumed once, once in the request that
    # consumed it and in every later one.
    for text in queued:
        carrying = [
            e
            for e in path
            if isinstance(e, MessageEntry)
            and isinstance(e.message, UserMessage)
            and text_of(e.message.content) == text
        ]
        assert len(carrying) == 1, f"{text!r} is on the path {len(carrying)} times"
        consumed = [
            e
            for e in all_events
            if e.type == "queue_consumed" and e.payload["entry_id"] == carrying[0].id
        ]
        assert len(consumed) == 1, f"{text!r} consumed {len(consumed)} times"
        counts = [user_texts(r.body).count(text) for r in requests]
        assert 1 in counts, f"{text!r} never reached the model"
        first = counts.index(1)
        assert counts[first:] == [1] * (len(counts) - first), f"{text!r} sent as {counts}"
        assert not any(counts[:first])
    return path


def _answered_part(path: Sequence[SessionEntry]) -> Sequence[SessionEntry]:
    """The path up to (not including) its last assistant message: what the model was
    asked when it wrote that message."""
    last = max(
        (
            i
            for i, e in enumerate(path)
            if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
        ),
        default=len(path),
    )
    return path[:last]


def _tool_blocks(message: AgentMessage) -> list[tuple[str, str]]:
    if isinstance(message, AssistantMessage):
        return [("tool_use", call.id) for call in message.tool_calls]
    if isinstance(message, ToolResultMessage):
        return [("tool_result", message.tool_call_id)]
    return []
