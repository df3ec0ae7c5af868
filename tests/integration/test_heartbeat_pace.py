"""Heartbeats for liveness only (`activities.heartbeat`): far apart, yet an abort reaches
a running call at once, and a live call is never taken for lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support import Stack, bash_then_text, event_seen, eventually
from temporalio.api.enums.v1 import EventType

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.domain.runs import session_workflow_id


@pytest.mark.script(bash_then_text("echo started; sleep 60", "Carrying on."))
async def test_an_abort_reaches_a_call_at_once_when_heartbeats_are_far_apart(
    stack: Stack,
) -> None:
    """A running call heartbeats every 20 s (a third of the 60 s timeout); the workflow
    task that cancels it runs in the same process, which tells the call to heartbeat now,
    so the abort does not wait for the next heartbeat."""
    stack.heartbeat_every(60.0)
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.runs.prompt(session.id, "run it")
        await eventually(lambda: event_seen(stack, session.id, "tool_execution_update"))
        result = await asyncio.wait_for(stack.client.runs.abort(session.id), timeout=10)
    assert result.status == "aborted"
    cancelled = (await stack.client.tree.path(session.id))[2]
    assert isinstance(cancelled, MessageEntry)
    assert isinstance(cancelled.message, ToolResultMessage)
    assert "cancelled before it finished" in text_of(cancelled.message.content)


@pytest.mark.script(bash_then_text("sleep 3; echo done > done.txt", "Done."))
async def test_a_call_far_slower_than_its_heartbeat_timeout_is_not_taken_for_lost(
    stack: Stack,
) -> None:
    """Heartbeating only for liveness, a 3 s call still heartbeats within its 1 s
    timeout: it completes on its first attempt."""
    stack.settings = stack.settings.model_copy(update={"heartbeat_timeout_s": 1.0})
    stack.client.settings = stack.settings
    session = await stack.client.sessions.create()
    async with stack.worker():
        result = await (await stack.client.runs.prompt(session.id, "run it")).result()
    assert result.status == "completed", result.error
    assert (Path(session.workspace) / "done.txt").read_text() == "done\n"
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session.id))
    attempts = [
        event.activity_task_started_event_attributes.attempt
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert attempts and set(attempts) == {1}
