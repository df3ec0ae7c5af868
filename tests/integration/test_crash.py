"""The worker is SIGKILLed mid-run; a new worker finishes it, every entry exactly once."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path

import pytest
from support import (
    BOTH_PROTOCOLS,
    BOTH_STORES,
    Stack,
    assert_valid_pairing,
    bash_then_text,
    event_seen,
    eventually,
    transcript_roles,
)

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.domain.runs import session_workflow_id


async def heartbeat_says(stack: Stack, session_id: str, text: str) -> bool:
    """A running call of the session's run has heartbeat details holding `text`."""
    handle = stack.temporal.get_workflow_handle(session_workflow_id(session_id))
    pending = (await handle.describe()).raw_description.pending_activities
    return any(
        text.encode() in payload.data
        for activity in pending
        for payload in activity.heartbeat_details.payloads
    )


SLOW_COMMAND = "echo started >> log.txt; echo working; sleep 12; echo finished >> log.txt"


@BOTH_STORES
@pytest.mark.script(
    {
        "conversations": {
            "*": [
                # 1st model call: hangs; the worker is killed while it waits.
                {"hang": True},
                # The retried call (on the new worker) plans a slow, non-retry-safe command.
                {
                    "reply": [
                        {"text": "Running it."},
                        {"tool_use": {"name": "bash", "input": {"command": SLOW_COMMAND}}},
                    ]
                },
                # After the second crash the model is told the call was interrupted.
                {"reply": [{"text": "It was interrupted; I will not repeat it."}]},
            ]
        }
    }
)
@BOTH_PROTOCOLS
async def test_worker_killed_during_model_call_and_during_tool_call(stack: Stack) -> None:
    stack.heartbeat_every(3.0)  # the command's heartbeats carry its process and output
    session = await stack.client.sessions.create()
    workspace = Path(session.workspace)
    first = stack.spawn_worker()
    handle = await stack.client.runs.prompt(session.id, "do the slow thing")

    await eventually(lambda: len(stack.model.requests_for(session.id)) == 1, timeout=30)
    stack.kill(first)

    second = stack.spawn_worker()
    log = workspace / "log.txt"
    await eventually(lambda: log.exists() and "started" in log.read_text(), timeout=30)
    command_started = time.monotonic()
    # Heartbeats (every third of the heartbeat timeout) carry the process and its output.
    await eventually(lambda: heartbeat_says(stack, session.id, "working"), timeout=30)
    stack.kill(second)

    third = stack.spawn_worker()
    result = await asyncio.wait_for(handle.result(), timeout=60)
    stack.kill(third)

    assert result.status == "completed", result.error
    assert result.final_text == "It was interrupted; I will not repeat it."
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    assert_valid_pairing(path)
    interrupted = path[2]
    assert isinstance(interrupted, MessageEntry) and isinstance(
        interrupted.message, ToolResultMessage
    )
    assert interrupted.message.is_error
    assert "interrupted by a worker failure" in text_of(interrupted.message.content)
    assert "not run again" in text_of(interrupted.message.content)

    assert "was stopped" in text_of(interrupted.message.content)
    assert "working" in text_of(interrupted.message.content)  # its output so far

    # Nothing twice: the command started once, and the orphan it left was stopped
    # before it could finish; every entry stored once.
    await asyncio.sleep(max(0.0, command_started + 13 - time.monotonic()))
    assert log.read_text() == "started\n"
    entries = await stack.client.tree.entries(session.id)
    assert len(entries) == len({e.id for e in entries}) == 4
    assert [d.role for d in await stack.client.display.messages(session.id)] == transcript_roles(
        path
    )
    # The model was asked three times: the hung call, its retry, the final turn.
    assert len(stack.model.requests_for(session.id)) == 3


@pytest.mark.script(bash_then_text("echo go >> runs.txt; sleep 5", "Noted the steer."))
async def test_steer_signalled_before_a_crash_is_delivered_once(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    handle = await stack.client.runs.prompt(session.id, "work")
    runs = Path(session.workspace) / "runs.txt"
    await eventually(lambda: runs.exists(), timeout=30)
    steer_id = await stack.client.inputs.steer(session.id, "also update the docs")
    stack.kill(first)  # the steer is in the run's history, not yet in any model request
    second = stack.spawn_worker()
    result = await asyncio.wait_for(handle.result(), timeout=60)
    stack.kill(second)

    assert result.status == "completed", result.error
    requests = stack.model.requests_for(session.id)
    assert len(requests) == 2
    steered = [
        b["text"]
        for m in requests[1].body["messages"]
        for b in m["content"]
        if m["role"] == "user" and b["type"] == "text"
    ]
    assert steered.count("also update the docs") == 1
    path = await stack.client.tree.path(session.id)
    assert [e.id for e in path].count(steer_id) == 1
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "user", "assistant"]
    assert runs.read_text() == "go\n"  # the bash call was not run twice


async def ended(stack: Stack, session_id: str, call_id: str) -> bool:
    return await event_seen(stack, session_id, "tool_execution_end", tool_call_id=call_id)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"text": "Three at once."},
                        {
                            "tool_use": {
                                "id": "call_fast",
                                "name": "bash",
                                "input": {"command": "echo one >> log.txt"},
                            }
                        },
                        {
                            "tool_use": {
                                "id": "call_slow",
                                "name": "bash",
                                "input": {"command": SLOW_COMMAND},
                            }
                        },
                        {
                            "tool_use": {
                                "id": "call_read",
                                "name": "read",
                                "input": {"path": "notes.txt"},
                            }
                        },
                    ]
                },
                {"reply": [{"text": "The slow one was interrupted."}]},
            ]
        }
    }
)
async def test_worker_killed_between_two_tools_of_one_turn(stack: Stack) -> None:
    """A turn is one activity: the worker dies after some of its calls finished and while
    another runs. The retry keeps the finished results (nothing runs twice, the model is
    not asked again for the turn) and reports the interrupted call, which it does not
    run again."""
    stack.heartbeat_every(3.0)  # the command's heartbeat carries its process, to stop
    session = await stack.client.sessions.create()
    workspace = Path(session.workspace)
    (workspace / "notes.txt").write_text("the notes\n")
    first = stack.spawn_worker()
    handle = await stack.client.runs.prompt(session.id, "do three things")
    log = workspace / "log.txt"
    for call_id in ("call_fast", "call_read"):  # finished, their results staged
        await eventually(partial(ended, stack, session.id, call_id), timeout=30)
    await eventually(lambda: log.exists() and "started" in log.read_text(), timeout=30)
    stack.kill(first)

    second = stack.spawn_worker()
    result = await asyncio.wait_for(handle.result(), timeout=60)
    stack.kill(second)

    assert result.status == "completed", result.error
    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    assert_valid_pairing(path)
    results = {
        e.message.tool_call_id: e.message
        for e in path
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    }
    assert not results["call_fast"].is_error
    assert text_of(results["call_read"].content).strip().endswith("the notes")
    slow = results["call_slow"]
    assert slow.is_error and "interrupted by a worker failure" in text_of(slow.content)
    assert "was stopped" in text_of(slow.content)
    # Nothing twice: each command started once; the model answered the turn once.
    assert log.read_text().splitlines().count("one") == 1
    assert log.read_text().splitlines().count("started") == 1
    assert len(stack.model.requests_for(session.id)) == 2
    entries = await stack.client.tree.entries(session.id)
    assert len(entries) == len({e.id for e in entries}) == 6
