"""How soon a run moves on after its worker dies, and that a slow model is not a dead one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support import Stack, eventually
from temporalio.api.enums.v1 import EventType

from duragent.domain.runs import session_workflow_id

SLOW_FIRST_BYTE_MS = 2500
"""Longer than the heartbeat timeout the slow-model test sets (1 s), twice over."""


async def history_event_types(stack: Stack, session_id: str) -> list[int]:
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session_id))
    return [event.event_type async for event in handle.fetch_history_events()]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {
                            "tool_use": {
                                "name": "bash",
                                "input": {"command": "echo go > started; sleep 60"},
                            }
                        }
                    ]
                },
                {"reply": [{"text": "It was interrupted."}]},
            ]
        }
    }
)
async def test_run_moves_on_at_once_after_its_worker_dies_during_a_tool_call(
    stack: Stack,
) -> None:
    """The retried call's result goes to the live worker, not to the dead worker's sticky
    queue, where it would wait out the sticky timeout (a workflow task timed out)."""
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    handle = await stack.client.runs.prompt(session.id, "work")
    started = Path(session.workspace) / "started"
    await eventually(started.exists, timeout=60)
    second = stack.spawn_worker()
    await asyncio.sleep(0.3)  # heartbeats flowing
    stack.kill(first)

    result = await asyncio.wait_for(handle.result(), timeout=60)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert len(stack.model.requests_for(session.id)) == 2
    types = await history_event_types(stack, session.id)
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT not in types


@pytest.mark.script(
    {
        "conversations": {
            "*": [{"delay_ms": SLOW_FIRST_BYTE_MS, "reply": [{"text": "Slow, but here."}]}]
        }
    }
)
async def test_slow_first_byte_is_not_a_dead_worker(stack: Stack) -> None:
    """The model call heartbeats while it waits for the provider's first byte, so a slow
    provider is never taken for a lost worker and called twice."""
    settings = stack.settings.model_copy(update={"heartbeat_timeout_s": 1.0})
    stack.client.settings = settings
    session = await stack.client.sessions.create()
    async with stack.worker():
        result = await (await stack.client.runs.prompt(session.id, "hello")).result()

    assert result.status == "completed", result.error
    assert result.final_text == "Slow, but here."
    assert len(stack.model.requests_for(session.id)) == 1
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session.id))
    attempts = [
        event.activity_task_started_event_attributes.attempt
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert attempts == [1]
