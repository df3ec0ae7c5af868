"""A worker SIGKILLed during an MCP tool call: the next worker reports the call as
interrupted and never runs it again, unless the server's config says `retry_safe`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from checks import assert_session_sound, tool_results
from mcp_support import calls, stdio_server, write_config
from support import Stack, eventually

from duragent.domain.messages import text_of


@pytest.mark.parametrize("retry_safe", [False, True], ids=["not-retry-safe", "retry-safe"])
async def test_worker_killed_during_an_mcp_call(
    stack_factory: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    retry_safe: bool,
) -> None:
    log, flag = tmp_path / "one.log", tmp_path / "flag"
    config = write_config(
        tmp_path / "mcp.json", {"one": stdio_server("one", log, retry_safe=retry_safe)}
    )
    monkeypatch.setenv("DURAGENT_MCP_CONFIG", str(config))  # the workers' environment
    script = {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "one__wait", "input": {"until": str(flag)}}}]},
                {"reply": [{"text": "noted"}]},
            ]
        }
    }
    async with stack_factory(script) as stack:
        assert isinstance(stack, Stack)
        session = await stack.client.sessions.create()
        first = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "wait for it")
        await eventually(Path(f"{flag}.waiting").exists, timeout=60)
        stack.kill(first)
        flag.touch()  # a call run again now finishes at once
        second = stack.spawn_worker()
        result = await asyncio.wait_for(run.result(), timeout=90)
        stack.kill(second)

        assert result.status == "completed", result.error
        # The workers' stdio server wrote its stderr under the state directory.
        assert (stack.settings.home / "mcp-logs" / "one.log").exists()
        answer = tool_results(assert_session_sound(stack, session.id))["one__wait"]
        text = text_of(answer.content)
        if retry_safe:
            assert not answer.is_error and text == "released", text
            assert calls(log, "wait") == 2
        else:
            assert answer.is_error and "interrupted by a worker failure" in text, text
            assert "was not run again" in text, text
            assert calls(log, "wait") == 1
