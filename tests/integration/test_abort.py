"""Abort is workflow cancellation: work stops, finished results stay, the session works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import wire
from support import (
    BOTH_PROTOCOLS,
    Stack,
    assert_valid_pairing,
    bash_then_text,
    event_seen,
    eventually,
    transcript_roles,
)

from duragent.domain.entries import CustomMessageEntry, MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage, text_of


def group_alive(pgid: int) -> bool:
    from duragent.activities.tools import process_group_alive

    return process_group_alive(pgid)


async def prompt_again_works(stack: Stack, session_id: str) -> None:
    """A new prompt after the abort succeeds; the server (which checks tool pairing like
    the real API) accepted the transcript, and it tells the model about the abort."""
    result = await (await stack.client.runs.prompt(session_id, "carry on")).result()
    assert result.status == "completed", result.error
    sent = stack.model.requests_for(session_id)[-1]
    assert sent.status == 200
    assert any("aborted the run" in t for t in wire.user_texts(sent.body))
    assert_valid_pairing(await stack.client.tree.path(session_id))


LONG_TEXT = "This is a long streamed answer that the user will interrupt. " * 20


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "chunk_delay_ms": 100,
                    "reply": [{"text": LONG_TEXT}],
                    "usage": {"input_tokens": 700, "cache_read_input_tokens": 300},
                },
                {"reply": [{"text": "Carrying on."}]},
            ]
        }
    }
)
@BOTH_PROTOCOLS
async def test_abort_during_a_model_stream(stack: Stack, protocol: str) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "talk")
        await stack.client.inputs.follow_up(session.id, "and then more")
        await eventually(lambda: event_seen(stack, session.id, "message_update"))
        result = await stack.client.runs.abort(session.id)
        assert result.status == "aborted" and result.run_id == run.run_id
        assert result.cleared_follow_ups == ["and then more"]
        path = await stack.client.tree.path(session.id)
        assert transcript_roles(path) == ["user", "assistant"]
        partial = path[1]
        assert isinstance(partial, MessageEntry) and isinstance(partial.message, AssistantMessage)
        assert partial.message.stop_reason == "aborted"
        assert 0 < len(text_of(partial.message.content)) < len(LONG_TEXT)
        assert isinstance(path[2], CustomMessageEntry) and path[2].custom_type == "abort"
        # What the stopped call used counts: the input it sent was paid for. OpenAI's
        # streams report usage only as they end, so a stopped one's is unknown there.
        expected = (700, 300) if protocol == "anthropic" else (0, 0)
        usage = partial.message.usage
        assert (usage.input_tokens, usage.cache_read_tokens) == expected
        assert result.usage == partial.message.usage
        record = await stack.client.runs.get(run.run_id)
        assert record is not None and record.status == "aborted"
        assert record.usage == partial.message.usage
        assert await stack.client.inputs.next_turn_items(session.id) == []  # cleared, not kept
        await prompt_again_works(stack, session.id)


@pytest.mark.script(bash_then_text("echo $$ > pid.txt; echo started; sleep 60", "Carrying on."))
async def test_abort_kills_a_running_bash_command(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    pid_file = Path(session.workspace) / "pid.txt"
    async with stack.worker():
        await stack.client.runs.prompt(session.id, "run it")
        await eventually(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        pgid = int(pid_file.read_text())
        await eventually(lambda: event_seen(stack, session.id, "tool_execution_update"))
        assert group_alive(pgid)
        result = await stack.client.runs.abort(session.id)
        assert result.status == "aborted"
        await eventually(lambda: not group_alive(pgid), timeout=5)
        path = await stack.client.tree.path(session.id)
        assert transcript_roles(path) == ["user", "assistant", "toolResult"]
        cancelled = path[2]
        assert isinstance(cancelled, MessageEntry) and isinstance(
            cancelled.message, ToolResultMessage
        )
        assert cancelled.message.is_error
        assert "cancelled before it finished" in text_of(cancelled.message.content)
        assert "started" in text_of(cancelled.message.content)  # the output so far
        await prompt_again_works(stack, session.id)
    assert os.path.exists(pid_file)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {
                            "tool_use": {
                                "name": "write",
                                "input": {"path": "done.txt", "content": "kept"},
                            }
                        },
                        {"tool_use": {"name": "bash", "input": {"command": "sleep 60"}}},
                        {"tool_use": {"name": "read", "input": {"path": "notes.txt"}}},
                    ]
                },
                {"reply": [{"text": "Carrying on."}]},
            ]
        }
    }
)
async def test_abort_during_a_parallel_batch_keeps_finished_results(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    # The read runs beside the write, so it reads a file of its own, there before the run.
    workspace = Path(session.workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("kept\n")
    async with stack.worker():
        await stack.client.runs.prompt(session.id, "do three things")
        await eventually(
            lambda: event_seen(stack, session.id, "tool_execution_end", tool_name="write")
        )
        await eventually(
            lambda: event_seen(stack, session.id, "tool_execution_start", tool_name="bash")
        )
        await stack.client.inputs.steer(session.id, "never mind that")
        result = await stack.client.runs.abort(session.id)
        assert result.cleared_steering == ["never mind that"]
        path = await stack.client.tree.path(session.id)
        assert transcript_roles(path) == [
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "toolResult",
        ]
        results = [
            e.message
            for e in path[2:5]
            if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
        ]
        written, slept, read = results
        assert not written.is_error and "done.txt" in text_of(written.content)
        assert slept.is_error and "cancelled" in text_of(slept.content)
        assert "kept" in text_of(read.content) or "cancelled" in text_of(read.content)
        assert_valid_pairing(path)
        await prompt_again_works(stack, session.id)


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "after the stop"}]}]}})
async def test_a_run_stopped_before_any_worker_took_it_is_recorded_as_aborted(
    stack: Stack,
) -> None:
    """Stopped before its start was recorded (no worker was up): the run still has a
    record, aborted, and a start to match its end; the session takes the next prompt."""
    session = await stack.client.sessions.create()
    handle = await stack.client.runs.prompt(session.id, "never started")
    await handle.workflow.cancel()  # what `abort` asks; its answer needs a worker
    async with stack.worker():
        result = await handle.result()
        assert result.status == "aborted"
        record = await stack.client.runs.get(handle.run_id)
        assert record is not None and record.status == "aborted" and record.ended_at
        kinds = [e.type async for e in stack.client.events.stream(session.id, follow=False)]
        assert kinds == ["agent_start", "agent_end"]
        again = await (await stack.client.runs.prompt(session.id, "carry on")).result()
        assert again.status == "completed", again.error
    first = (await stack.client.tree.path(session.id))[0]
    assert isinstance(first, MessageEntry) and text_of(first.message.content) == "carry on"
