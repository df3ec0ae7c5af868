"""MCP servers' tools, called by the model through a real worker: a stdio and an HTTP server
(tests/mcp_servers/, written with the `mcp` SDK) that the tests start and kill."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp_support import (
    HTTP_TOKEN,
    calls,
    handshakes,
    http_server,
    processes,
    registry,
    running_http_server,
    stdio_server,
    write_config,
)
from support import Stack, event_seen, eventually

from duragent.client.api import DuragentClient
from duragent.client.errors import InvalidChange
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_use": {"name": name, "input": args}}


def script(*replies: list[dict[str, Any]]) -> dict[str, Any]:
    return {"conversations": {"*": [{"reply": reply} for reply in replies]}}


def tool_results(request_body: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """tool_use id -> (text, is_error) of the tool results in a Messages API request."""
    found: dict[str, tuple[str, bool]] = {}
    for message in request_body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block.get("content") or []
                text = "".join(part.get("text", "") for part in content if isinstance(part, dict))
                found[block["tool_use_id"]] = (text, bool(block.get("is_error")))
    return found


def results_in_order(request_body: dict[str, Any]) -> list[tuple[str, bool]]:
    return list(tool_results(request_body).values())


def stored_results(stack: Stack, session_id: str) -> list[ToolResultMessage]:
    return [
        e.message
        for e in stack.client.sync.tree.path(session_id)
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


async def test_stdio_and_http_tools_are_offered_and_called_with_results_at_the_wire(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    async with running_http_server("web", tmp_path / "web.log") as web:
        servers = {"one": stdio_server("one", tmp_path / "one.log"), "web": http_server(web.port)}
        replies = script(
            [call("one__echo", text="hello"), call("web__add", a=2, b=3)],
            [{"text": "done"}],
        )
        async with stack_factory(replies) as stack:
            session = await stack.client.sessions.create()
            async with stack.worker(tools=registry(servers)):
                result = await (await stack.client.runs.prompt(session.id, "use both")).result()
            assert result.status == "completed", result.error
            first, second = stack.model.requests_for(session.id)
            offered = {tool["name"]: tool for tool in first.body["tools"]}
            assert {"one__echo", "one__wait", "web__echo", "web__add", "read", "bash"} <= set(
                offered
            )
            assert offered["one__echo"]["description"].startswith("Return the text")
            assert offered["web__add"]["input_schema"]["required"] == ["a", "b"]
            # The next request the model received carries both servers' answers.
            assert results_in_order(second.body) == [("one says: hello", False), ("5", False)]
            # The server's bearer token went to the server, and nowhere else.
            events = [e async for e in stack.client.events.stream(session.id, follow=False)]
            assert HTTP_TOKEN not in str([e.payload for e in events])
            assert HTTP_TOKEN not in str(second.body)


async def test_one_connection_per_server_across_calls_and_turns(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    async with running_http_server("web", tmp_path / "web.log") as web:
        one_log, web_log = tmp_path / "one.log", tmp_path / "web.log"
        servers = {"one": stdio_server("one", one_log), "web": http_server(web.port)}
        replies = script(
            [call("one__echo", text="a"), call("one__echo", text="b"), call("web__echo", text="c")],
            [call("one__echo", text="d"), call("web__echo", text="e")],
            [{"text": "first done"}],
            [call("one__add", a=1, b=1), call("web__add", a=1, b=2)],
            [{"text": "second done"}],
        )
        async with stack_factory(replies) as stack:
            session = await stack.client.sessions.create()
            async with stack.worker(tools=registry(servers)):
                for prompt in ("first", "second"):
                    result = await (await stack.client.runs.prompt(session.id, prompt)).result()
                    assert result.status == "completed", result.error
            texts = [text_of(m.content) for m in stored_results(stack, session.id)]
            assert texts == [
                *["one says: a", "one says: b", "web says: c", "one says: d", "web says: e"],
                *["2", "3"],
            ]
            # Five turns (each listing the tools) and seven calls: one connection each.
            assert calls(one_log, "echo") == 3 and calls(web_log, "echo") == 2
            assert handshakes(one_log) == 1 and len(processes(one_log)) == 1
            assert handshakes(web_log) == 1
            # The worker stopped its stdio server when it stopped.
            assert not process_alive(processes(one_log)[0])


async def test_stdio_server_killed_mid_call_gives_an_error_result_and_the_next_call_reconnects(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    log, flag = tmp_path / "one.log", tmp_path / "flag"
    replies = script(
        [call("one__wait", until=str(flag))],
        [call("one__echo", text="again")],
        [{"text": "carried on"}],
    )
    async with stack_factory(replies) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker(tools=registry({"one": stdio_server("one", log)})):
            run = await stack.client.runs.prompt(session.id, "wait, then echo")
            waiting = Path(f"{flag}.waiting")
            await eventually(waiting.exists)
            os.kill(int(waiting.read_text()), signal.SIGKILL)
            result = await run.result()
        assert result.status == "completed", result.error
        killed, again = stored_results(stack, session.id)
        assert killed.is_error
        assert "MCP server 'one'" in text_of(killed.content)
        assert "connection closed while calling `wait`" in text_of(killed.content)
        assert "whether it finished is unknown" in text_of(killed.content)
        assert text_of(again.content) == "one says: again" and not again.is_error
        assert len(processes(log)) == 2  # the next call started the server again
        # The model saw the error, then the answer of the new connection.
        last = stack.model.requests_for(session.id)[-1].body
        assert [ok for _, ok in results_in_order(last)] == [True, False]


async def test_http_server_killed_mid_call_and_restarted(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    log, flag = tmp_path / "web.log", tmp_path / "flag"
    async with running_http_server("web", log) as web:
        replies = script(
            [call("web__wait", until=str(flag))],
            [call("web__echo", text="back")],
            [{"text": "carried on"}],
        )
        # The model's second reply waits until the server is back.
        replies["conversations"]["*"][1]["wait_for"] = "back"
        async with stack_factory(replies) as stack:
            session = await stack.client.sessions.create()
            async with stack.worker(tools=registry({"web": http_server(web.port)})):
                run = await stack.client.runs.prompt(session.id, "wait, then echo")
                await eventually(Path(f"{flag}.waiting").exists)
                web.kill()
                await eventually(lambda: event_seen(stack, session.id, "tool_execution_end"))
                await web.start()  # on the same port
                stack.model.release("back")
                result = await run.result()
            assert result.status == "completed", result.error
            killed, back = stored_results(stack, session.id)
            assert killed.is_error and "MCP server 'web'" in text_of(killed.content)
            assert "whether it finished is unknown" in text_of(killed.content)
            assert HTTP_TOKEN not in text_of(killed.content)
            assert text_of(back.content) == "web says: back" and not back.is_error


async def test_a_server_that_is_down_gives_an_error_result_naming_it(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    missing = {"command": str(tmp_path / "no-such-server")}
    replies = script([call("gone__anything")], [{"text": "carried on"}])
    async with stack_factory(replies) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker(tools=registry({"gone": missing})):
            result = await (await stack.client.runs.prompt(session.id, "try")).result()
        assert result.status == "completed", result.error
        (answer,) = stored_results(stack, session.id)
        assert answer.is_error
        assert "MCP server 'gone'" in text_of(answer.content)
        assert "could not connect" in text_of(answer.content)


async def test_abort_during_an_mcp_call_cancels_it_promptly(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    log, flag = tmp_path / "one.log", tmp_path / "flag"
    replies = script([call("one__wait", until=str(flag))], [{"text": "after"}])
    async with stack_factory(replies) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker(tools=registry({"one": stdio_server("one", log)})):
            await stack.client.runs.prompt(session.id, "wait")
            await eventually(Path(f"{flag}.waiting").exists)
            started = time.monotonic()
            result = await stack.client.runs.abort(session.id)
            assert result.status == "aborted"
            assert time.monotonic() - started < 5  # the tool itself would wait 120 s
        (cancelled,) = stored_results(stack, session.id)
        assert cancelled.is_error and "cancelled before it finished" in text_of(cancelled.content)


async def test_a_session_uses_only_the_servers_it_chooses(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    servers = {
        "one": stdio_server("one", tmp_path / "one.log"),
        "two": stdio_server("two", tmp_path / "two.log"),
    }
    config = write_config(tmp_path / "mcp.json", servers)
    replies = script([call("one__echo", text="x"), call("two__echo", text="y")], [{"text": "ok"}])
    async with stack_factory(replies) as stack:
        settings = stack.settings.model_copy(update={"mcp_config": config})
        client = DuragentClient(stack.temporal, stack.db, settings)
        session = await client.sessions.create()
        with pytest.raises(
            InvalidChange, match="unknown MCP server 'three'; the servers are one, two"
        ):
            await client.config.set_mcp_servers(session.id, ["three"])
        with pytest.raises(InvalidChange, match="unknown tool 'three__echo'"):
            await client.config.set_active_tools(session.id, ["read", "three__echo"])
        async with stack.worker(tools=registry(servers)):
            await client.config.set_mcp_servers(session.id, ["two"])
            assert (await client.sessions.status(session.id)).config.mcp_servers == ["two"]
            result = await (await client.runs.prompt(session.id, "both")).result()
        assert result.status == "completed", result.error
        first, second = stack.model.requests_for(session.id)
        offered = {tool["name"] for tool in first.body["tools"]}
        assert "two__echo" in offered and not any(n.startswith("one__") for n in offered)
        refused, used = results_in_order(second.body)
        assert refused[1] and "MCP server 'one', which this session does not use" in refused[0]
        assert used == ("two says: y", False)
        assert not (tmp_path / "one.log").exists()  # never started
