"""Worker leases (`activities.leases`): a lost worker's call moves on once its lease
lapses, long before its heartbeat timeout (60 s here); a worker stopped past its lease
and then continued does not complete its call twice; a run aborted while the worker of
its call is dead ends aborted; a call is recorded before it runs, so a worker killed at
once gives it up too."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from checks import events_of
from sqlalchemy import select
from support import Stack, bash_then_text, eventually, transcript_roles
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from duragent import RunHandle
from duragent.activities.tools import process_group_alive
from duragent.domain.entries import CustomMessageEntry
from duragent.domain.runs import session_workflow_id
from duragent.store.records import SessionRecord
from duragent.store.tables import RunningCallRow, table_of

BOUND_S = 10.0
"""Generous for a 2 s lease; a heartbeat timeout would take 60 s."""


def long_heartbeat_timeout(stack: Stack) -> None:
    """A 60 s heartbeat timeout: only the lease can move a lost worker's call on soon."""
    stack.heartbeat_every(60.0)


def signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    os.killpg(process.pid, sig)


async def tool_running_on_a_worker_process(
    stack: Stack,
) -> tuple[SessionRecord, subprocess.Popen[bytes], RunHandle, Path]:
    """A run whose bash call runs (its shell wrote its pid to the returned file) on a
    worker process of its own; heartbeat timeout 60 s."""
    long_heartbeat_timeout(stack)
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "work")
    pid_file = Path(session.workspace) / "pid.txt"
    await eventually(lambda: pid_file.exists() and bool(pid_file.read_text()), timeout=60)
    return session, first, run, pid_file


@pytest.mark.script(bash_then_text("echo $$ > pid.txt; sleep 60", "It was interrupted."))
async def test_a_killed_workers_call_moves_on_once_its_lease_lapses(stack: Stack) -> None:
    session, first, run, pid_file = await tool_running_on_a_worker_process(stack)
    async with stack.worker():
        killed = time.monotonic()
        stack.kill(first)
        # The next attempt reports the call interrupted and the model is asked again.
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 2, timeout=BOUND_S)
        moved_on = time.monotonic() - killed
        result = await asyncio.wait_for(run.result(), timeout=30)
    assert result.status == "completed", result.error
    assert moved_on < BOUND_S
    assert not process_group_alive(int(pid_file.read_text()))  # the orphan was stopped
    (ended,) = events_of(stack, session.id, "tool_execution_end")
    assert ended["attempt"] == 2 and ended["result"]["details"]["interrupted"]


@pytest.mark.script(bash_then_text("echo $$ > pid.txt; sleep 60", "It was interrupted."))
async def test_a_call_is_recorded_before_it_runs_so_a_worker_killed_at_once_gives_it_up(
    stack: Stack,
) -> None:
    """A worker killed the moment its call began, before a lease round could record it:
    the call recorded itself as it began, so it is among the lost worker's calls and
    moves on as any other."""
    session, first, run, _ = await tool_running_on_a_worker_process(stack)
    with stack.db.transaction() as db:  # the shell runs: its call was recorded before
        recorded = db.execute(select(table_of(RunningCallRow).c.activity_id)).scalars().all()
    assert recorded == ["turn-1-1"]  # the turn's call, its tool calls inside it
    stack.kill(first)
    async with stack.worker():
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 2, timeout=BOUND_S)
        result = await asyncio.wait_for(run.result(), timeout=30)
    assert result.status == "completed", result.error
    (ended,) = events_of(stack, session.id, "tool_execution_end")
    assert ended["attempt"] == 2 and ended["result"]["details"]["interrupted"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"wait_for": "first", "reply": [{"text": "From the first attempt."}]},
                {"wait_for": "retry", "reply": [{"text": "From the retry."}]},
            ]
        }
    }
)
async def test_a_worker_stopped_past_its_lease_does_not_complete_its_call(
    stack: Stack,
) -> None:
    """Stopped (SIGSTOP) during a model call, the worker's lease lapses and the call's
    first attempt is failed; continued, that worker gets its reply and completes the
    call before the retry does, and Temporal rejects it: only the retry completes it.
    (The retry may land on either worker: the stopped one still has polls open.)"""
    async with first_attempt_failed_as_lost(stack) as (session, run, _):
        stack.model.release("first")
        # The first attempt got its whole reply and completes the call ...
        await eventually(lambda: reply_ended(stack, session.id, "From the first attempt."))
        # ... at once (a negative has no event to wait for: what it would change, the
        # run taking that reply, would show within this).
        await asyncio.sleep(0.5)
        stack.model.release("retry")
        result = await asyncio.wait_for(run.result(), timeout=30)
    assert result.status == "completed", result.error
    # The retry keeps a reply an earlier attempt staged whole (`activities.model_turn`),
    # so either reply may be the run's; there is one, once.
    assert result.final_text in ("From the first attempt.", "From the retry.")
    assert transcript_roles(await stack.client.tree.path(session.id)) == ["user", "assistant"]
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session.id))
    history = [event async for event in handle.fetch_history_events()]
    started = [
        e.activity_task_started_event_attributes.attempt
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    completed = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    assert started == [2] and len(completed) == 1


@contextlib.asynccontextmanager
async def first_attempt_failed_as_lost(
    stack: Stack,
) -> AsyncIterator[tuple[SessionRecord, RunHandle, Path]]:
    """A run whose model call's first attempt, on a worker process of its own, was failed
    as lost while that worker was stopped (SIGSTOP) past its lease; the worker continued
    again, its attempt still waiting for the model's reply (held at gate `first`), and
    a worker in this process up (the retry may land on either). With the worker's log."""
    long_heartbeat_timeout(stack)
    session = await stack.client.sessions.create()
    log = stack.settings.home / f"worker-{len(stack.processes)}.log"
    first = stack.spawn_worker()
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session.id))
    try:
        run = await stack.client.runs.prompt(session.id, "talk")
        await eventually(lambda: len(stack.model.requests_for(session.id)) == 1, timeout=60)
        async with stack.worker():
            signal_group(first, signal.SIGSTOP)
            await eventually(lambda: model_call_attempt(handle, 2), timeout=BOUND_S)
            signal_group(first, signal.SIGCONT)
            yield session, run, log
    finally:
        if first.poll() is None:
            signal_group(first, signal.SIGCONT)


async def model_call_attempt(handle: WorkflowHandle[Any, Any], attempt: int) -> bool:
    """The run's pending call is at `attempt` (an earlier one failed)."""
    pending = (await handle.describe()).raw_description.pending_activities
    return any(p.attempt >= attempt for p in pending)


def running_calls(stack: Stack) -> list[str]:
    """The calls recorded under a worker's lease (their activity ids)."""
    with stack.client.db.transaction() as db:
        return [row.activity_id for row in db.execute(select(table_of(RunningCallRow)))]


def reply_ended(stack: Stack, session_id: str, text: str) -> bool:
    return any(text in str(e) for e in events_of(stack, session_id, "message_end"))


@pytest.mark.script(
    {"conversations": {"*": [{"wait_for": "never", "reply": [{"text": "Never sent."}]}]}}
)
async def test_an_abort_while_the_calls_worker_is_dead_ends_the_run_aborted(
    stack: Stack,
) -> None:
    """The cancel cannot reach a dead worker's call: the call fails as lost once the
    lease lapses. The user asked for an abort, so the run is aborted, not failed."""
    long_heartbeat_timeout(stack)
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "talk")
    await eventually(lambda: len(stack.model.requests_for(session.id)) == 1, timeout=60)
    # Leases record calls in batches (each renewal): kill once this one is recorded.
    await eventually(lambda: running_calls(stack) == ["turn-1-1"], timeout=30)  # the turn
    stack.kill(first)
    async with stack.worker():
        result = await asyncio.wait_for(stack.client.runs.abort(session.id), timeout=BOUND_S)
    assert result.run_id == run.run_id
    assert (result.status, result.error) == ("aborted", None)
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path)[:2] == ["user", "assistant"]
    marker = path[-1]
    assert isinstance(marker, CustomMessageEntry) and marker.custom_type == "abort"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "wait_for": "first",
                    "reply": [
                        {"text": "From the stopped worker."},
                        {"tool_use": {"name": "bash", "input": {"command": "echo ran > ran.txt"}}},
                    ],
                },
                {"reply": [{"text": "Done, from the retry."}]},
            ]
        }
    }
)
async def test_a_reply_that_comes_after_its_turn_was_saved_runs_no_call(stack: Stack) -> None:
    """Stopped during a model call past its lease, a worker's attempt is failed; the retry
    answers and the run completes, its turn saved. Then the stopped worker's reply comes,
    asking for a bash call: it finds its turn saved without it and stops there. (Run, the
    call would be in no session, and the turn it answers would be over.)"""
    async with first_attempt_failed_as_lost(stack) as (session, run, log):
        ran = Path(session.workspace) / "ran.txt"
        result = await asyncio.wait_for(run.result(), timeout=30)
        stack.model.release("first")
        await eventually(lambda: ran.exists() or "was saved already" in log.read_text())
    assert result.status == "completed", result.error
    assert result.final_text == "Done, from the retry."
    assert not ran.exists(), "the stale attempt ran its reply's call"
    assert transcript_roles(await stack.client.tree.path(session.id)) == ["user", "assistant"]
