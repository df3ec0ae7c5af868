"""A run without an end: 500 turns with compactions and several continue-as-news (the
2,000-turn run, with its per-turn times, is `bench/long_horizon.py`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Engine, event
from support import Stack, assert_valid_pairing, eventually
from temporalio.api.enums.v1 import EventType

from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import CompactionEntry, MessageEntry

TURNS = 500
SUGGESTED_EVENTS = 4096
SUGGESTED_BYTES = 4 * 1024 * 1024


def script() -> dict[str, object]:
    steps: list[dict[str, object]] = [
        {"match": "You are compacting", "repeat": True, "reply": [{"text": "## Goal\nGo on."}]},
        {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Listing."}]},
    ]
    steps += [{"reply": [{"tool_use": {"name": "ls", "input": {}}}]} for _ in range(TURNS - 1)]
    steps.append({"reply": [{"text": "Five hundred turns later."}]})
    return {"conversations": {"*": steps}}


def is_turn(body: dict[str, object]) -> bool:
    """A model turn's request (not a compaction's summary request)."""
    messages = body["messages"]
    assert isinstance(messages, list)
    return isinstance(messages[0]["content"], list)


@pytest.mark.timeout(300)
@pytest.mark.script(script())
async def test_five_hundred_turns(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    options = stack.client.runs.default_options().model_copy(
        update={
            "continue_as_new_after_turns": 100,
            "compaction": CompactionSettings(
                context_window=6_000, reserve_tokens=0, keep_recent_tokens=1_500
            ),
        }
    )
    # The worker in its own process, so it does not share a GIL with the model server.
    worker = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "list it again and again", options=options)
    # A steer in the middle of it all still arrives exactly once.
    await eventually(lambda: stack.model.remaining(session.id) < TURNS // 2, timeout=150)
    await stack.client.inputs.steer(session.id, "halfway there")
    result = await asyncio.wait_for(run.result(), timeout=200)
    stack.kill(worker)
    assert result.status == "completed", result.error
    assert result.turns == TURNS and result.final_text == "Five hundred turns later."

    # Several executions, every history below what Temporal suggests continuing at.
    executions = []
    async for listed in stack.temporal.list_workflows(f"WorkflowId = 'session-{session.id}'"):
        handle = stack.temporal.get_workflow_handle(listed.id, run_id=listed.run_id)
        history = await handle.fetch_history()
        size = sum(e.ByteSize() for e in history.events)
        executions.append((len(history.events), size, history.events[-1].event_type))
    assert len(executions) >= 5
    for count, size, _ in executions:
        assert count < SUGGESTED_EVENTS and size < SUGGESTED_BYTES
    continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert sum(kind == continued for _, _, kind in executions) == len(executions) - 1

    # Every execution is found by its session (the search attribute follows continue-as-new).
    async def all_found_by_session() -> bool:
        query = f"DuragentSessionId = '{session.id}' AND WorkflowType = 'SessionRun'"
        return len([w async for w in stack.temporal.list_workflows(query)]) == len(executions)

    await eventually(all_found_by_session)

    # The whole session is intact in the store.
    entries = await stack.client.tree.entries(session.id)
    messages = [e for e in entries if isinstance(e, MessageEntry)]
    assert len({e.id for e in entries}) == len(entries)
    assert len(messages) == 1 + 2 * (TURNS - 1) + 1 + 1  # prompt, calls+results, answer, steer
    assert sum(1 for e in entries if isinstance(e, CompactionEntry)) >= 5
    path = await stack.client.tree.path(session.id)
    assert_valid_pairing(path)
    assert [m.id for m in messages] == [e.id for e in path if isinstance(e, MessageEntry)]
    # Each compaction's summary is shown too (hidden, for its cost).
    compactions = [e for e in entries if isinstance(e, CompactionEntry)]
    assert len(await stack.client.display.messages(session.id)) == len(messages) + len(compactions)
    # And each compaction's end is told, not only the run's first one's.
    ended = [
        e.payload["entry_id"]
        async for e in stack.client.events.stream(session.id, follow=False)
        if e.type == "compaction_end"
    ]
    assert ended == [e.id for e in compactions]
    turns = [r.body for r in stack.model.requests_for(session.id) if is_turn(r.body)]
    steered = [b for b in turns if "halfway there" in str(b["messages"][-1])]
    assert len(steered) == 1
    run_state = await stack.client.runs.get(result.run_id)
    assert run_state is not None and run_state.turns == TURNS


class StoreWork:
    """How much the store goes through for the statements of a session's turns:
    SQLite's own count of the virtual-machine instructions they execute (a statement
    that walks a thousand rows executes thousands). The worker's background polls
    (cancel hints, its lease, running calls) go by the clock, not by the turns, and are
    left out."""

    BACKGROUND = ("cancel_hints", "worker_leases", "running_calls")

    def __init__(self, engine: Engine) -> None:
        self.steps = 0
        self._current: dict[int, bool] = {}
        event.listen(engine, "connect", self._connect)
        event.listen(engine, "before_cursor_execute", self._before)
        engine.dispose()  # connections opened from now on count

    def _connect(self, dbapi_connection: Any, _record: Any) -> None:
        key = id(dbapi_connection)

        def step() -> int:
            if self._current.get(key, False):
                self.steps += 1
            return 0  # go on

        dbapi_connection.set_progress_handler(step, 1)

    def _before(self, connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        counted = not any(table in statement for table in self.BACKGROUND)
        self._current[id(connection.connection.dbapi_connection)] = counted


def runs_script(runs: list[int]) -> dict[str, object]:
    """Runs of `ls` turns one after the other, each ending with a text."""
    steps: list[dict[str, object]] = [
        {"match": "You are compacting", "repeat": True, "reply": [{"text": "## Goal\nGo on."}]},
        {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Listing."}]},
    ]
    for turns in runs:
        steps += [{"reply": [{"tool_use": {"name": "ls", "input": {}}}]} for _ in range(turns - 1)]
        steps.append({"reply": [{"text": "Listed."}]})
    return {"conversations": {"*": steps}}


MEASURED = 30
RUNS = [20, MEASURED, 150, MEASURED]


@pytest.mark.timeout(300)
@pytest.mark.script(runs_script(RUNS))
async def test_a_turn_goes_through_as_much_of_the_store_late_in_a_session_as_early(
    stack: Stack,
) -> None:
    """What a turn reads of the store does not grow with the session: after 200 turns
    (compactions and continue-as-new every few turns) a turn costs the store what it
    cost after 20, the turns that compact or continue as new included."""
    if stack.db.engine.dialect.name != "sqlite":
        pytest.skip("counts SQLite's virtual-machine instructions")
    work = StoreWork(stack.db.engine)
    session = await stack.client.sessions.create()
    options = stack.client.runs.default_options().model_copy(
        update={
            "continue_as_new_after_turns": 10,
            "compaction": CompactionSettings(
                context_window=3_500, reserve_tokens=0, keep_recent_tokens=800
            ),
        }
    )
    per_turn: list[float] = []
    async with stack.worker():
        for turns in RUNS:
            before = work.steps
            run = await stack.client.runs.prompt(session.id, "list it again", options=options)
            result = await run.result()
            assert result.status == "completed" and result.turns == turns, result.error
            per_turn.append((work.steps - before) / turns)
    compactions = sum(
        1 for e in await stack.client.tree.entries(session.id) if isinstance(e, CompactionEntry)
    )
    assert compactions >= len(RUNS) * 2  # the measured runs compacted too
    early, late = per_turn[1], per_turn[3]
    assert late <= early * 1.2, f"per turn: {early:.0f} steps early, {late:.0f} late"
