"""Hooks (docs/SPEC.md): activity-side ones see the context; workflow-side ones are checked
for determinism by the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_hooks import ClockExtension, Guard
from support import Stack

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"tool_use": {"name": "bash", "input": {"command": "rm -rf /tmp/x"}}},
                        {"tool_use": {"name": "read", "input": {"path": "notes.txt"}}},
                    ]
                },
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo STOP"}}}]},
                {"reply": [{"text": "never reached"}]},
            ]
        }
    }
)
async def test_activity_and_workflow_hooks(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    (Path(session.workspace) / "notes.txt").write_text("the secret is 42\n")
    guard = Guard()
    async with stack.worker(extensions=[guard]):
        result = await (await stack.client.runs.prompt(session.id, "go")).result()
    # should_stop_after_turn saw "STOP" in a tool result and ended the run after turn 2.
    assert result.status == "completed" and result.turns == 2
    results = [
        e.message
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    blocked, read = results[0], results[1]
    assert blocked.is_error and "deleting files is not allowed here" in text_of(blocked.content)
    assert "the [redacted] is 42" in text_of(read.content)
    first, second = (r.body for r in stack.model.requests_for(session.id))
    # transformContext put a message first; the stored session does not have it.
    assert first["messages"][0]["content"][0]["text"].startswith("(turn 1 of session")
    # The provider ran once per snapshot: the first, then the save point's.
    assert first["system"][0]["text"].endswith("House rule #1.")
    assert second["system"][0]["text"].endswith("House rule #2.")
    # The hook's write through the session facade was pending during the turn and
    # landed at the save point, after the turn's own messages.
    types = [e.type for e in await stack.client.tree.path(session.id)]
    assert types[:5] == ["message", "message", "message", "message", "custom"]
    # prepare_next_turn switched the model for turn 2 only.
    assert first["model"] != "claude-after-hook" and second["model"] == "claude-after-hook"


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "hello"}]}]}})
async def test_a_workflow_hook_that_reads_the_clock_ends_the_run_with_a_clear_error(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker(extensions=[ClockExtension()]):
        result = await (await stack.client.runs.prompt(session.id, "go")).result()
    assert result.status == "error"
    assert result.error is not None
    assert "sample_hooks:ReadsTheClock" in result.error and "not deterministic" in result.error
    assert "time.time" in result.error
    # The turn itself was kept.
    assert [e.type for e in await stack.client.tree.path(session.id)] == ["message", "message"]
