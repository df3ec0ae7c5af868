"""What a model can reach through its tools, seen where it matters: the tool result the
model gets back in its next request, and the workspace afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import Stack


def tool_result_texts(stack: Stack, session_id: str, request: int) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool_result block in the session's `request`th request."""
    body = [r for r in stack.model.requests_for(session_id) if r.path == "/v1/messages"]
    found = []
    for message in body[request].body["messages"]:
        if message["role"] != "user" or not isinstance(message["content"], list):
            continue
        for block in message["content"]:
            if block.get("type") == "tool_result":
                content = block.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "".join(c.get("text", "") for c in content or [])
                )
                found.append((bool(block.get("is_error")), text))
    return found


def offered_tools(stack: Stack, session_id: str, request: int) -> list[str]:
    body = [r for r in stack.model.requests_for(session_id) if r.path == "/v1/messages"]
    return [tool["name"] for tool in body[request].body.get("tools", [])]


def bash_then_done(command: str) -> dict[str, Any]:
    return {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
                {"reply": [{"text": "Done."}]},
            ]
        }
    }


@pytest.mark.script(bash_then_done("touch ran.txt; echo ran"))
async def test_a_tool_that_is_not_active_is_refused_and_never_runs(stack: Stack) -> None:
    session = stack.client.create_session()
    async with stack.worker():
        await stack.client.set_active_tools(session.id, ["read", "grep"])
        result = await (await stack.client.prompt(session.id, "run it")).result()

    assert result.status == "completed", result.error
    assert offered_tools(stack, session.id, 0) == ["read", "grep"]
    # The model called bash anyway; what it got back names the rule and the active tools.
    ((is_error, text),) = tool_result_texts(stack, session.id, 1)
    assert is_error
    assert "'bash' is not active" in text and "was not run" in text
    assert "Active tools: read, grep." in text
    assert not (Path(session.workspace) / "ran.txt").exists()
