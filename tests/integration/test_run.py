"""A scripted multi-turn run end to end: real server, real HTTP, real database."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import BOTH_PROTOCOLS, BOTH_STORES, Stack, assert_valid_pairing, transcript_roles

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage, UserMessage, text_of

SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"text": "Looking first."}, {"tool_use": {"name": "ls", "input": {}}}]},
            {
                "reply": [
                    {"text": "Two things at once."},
                    {
                        "tool_use": {
                            "name": "write",
                            "input": {"path": "a.txt", "content": "alpha\n"},
                        }
                    },
                    {
                        "tool_use": {
                            "name": "bash",
                            "input": {"command": "echo beta > b.txt; echo done"},
                        }
                    },
                ]
            },
            {"reply": [{"tool_use": {"name": "read", "input": {"path": "b.txt"}}}]},
            {"reply": [{"text": "All done: a.txt and b.txt exist."}]},
        ]
    }
}


@BOTH_STORES
@pytest.mark.script(SCRIPT)
@BOTH_PROTOCOLS
async def test_scripted_run_with_parallel_tools(stack: Stack, protocol: str) -> None:
    session = await stack.client.sessions.create(name="demo")
    async with stack.worker():
        handle = await stack.client.runs.prompt(session.id, "Make two files.")
        result = await handle.result()

    assert result.status == "completed", result.error
    assert result.turns == 4
    assert result.final_text == "All done: a.txt and b.txt exist."

    path = await stack.client.tree.path(session.id)
    assert transcript_roles(path) == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert_valid_pairing(path)
    messages = [e.message for e in path if isinstance(e, MessageEntry)]
    assert (
        isinstance(messages[0], UserMessage) and text_of(messages[0].content) == "Make two files."
    )
    parallel = messages[3]
    assert isinstance(parallel, AssistantMessage)
    assert [c.name for c in parallel.tool_calls] == ["write", "bash"]
    read_result = messages[7]
    assert isinstance(read_result, ToolResultMessage) and "beta" in text_of(read_result.content)
    workspace = (await stack.client.sessions.get(session.id)).workspace
    assert (Path(workspace) / "a.txt").read_text() == "alpha\n"

    # Every entry once, the tree a single chain, the leaf at its end.
    entries = await stack.client.tree.entries(session.id)
    assert len({e.id for e in entries}) == len(entries) == len(path)
    assert (await stack.client.sessions.get(session.id)).leaf_id == path[-1].id

    display = await stack.client.display.messages(session.id)
    assert [d.role for d in display] == transcript_roles(path)

    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    types = [e.type for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert types.count("turn_start") == types.count("turn_end") == 4
    assert types.count("save_point") == 4
    assert types.count("tool_execution_start") == types.count("tool_execution_end") == 4
    assert "message_update" in types
    assert [e.seq for e in events] == sorted(e.seq for e in events)

    run = await stack.client.runs.get(result.run_id)
    assert run is not None and run.status == "completed" and run.turns == 4
    assert run.usage.output_tokens > 0

    # The offline model saw each turn's tool results paired with their calls.
    requests = stack.model.requests_for(session.id)
    assert len(requests) == 4
    roles = [m["role"] for m in requests[2].body["messages"]]
    if protocol == "anthropic":  # results in the user's message after their calls
        assert roles == ["user", "assistant", "user", "assistant", "user"]
    else:  # the system prompt first, a tool message per result
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
