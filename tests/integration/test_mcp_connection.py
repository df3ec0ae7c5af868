"""The connection to an MCP server under load and failure, through the registry as
`run_tool` calls it (no workflow needed): concurrent calls share one connection, a call
times out as configured, and no error message shows a header's secret."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp_support import HTTP_TOKEN, handshakes, http_server, registry, running_http_server
from mcp_support import stdio_server as stdio

from duragent.activities.tools import ToolContext


async def test_concurrent_calls_share_one_connection(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    tools = registry({"one": stdio("one", log)})
    ctx = ToolContext(tmp_path)
    try:
        results = await asyncio.gather(
            *(tools.run("one__add", {"a": i, "b": 1}, ctx) for i in range(20))
        )
        assert [r.content[0].text for r in results] == [str(i + 1) for i in range(20)]  # type: ignore[union-attr]
        assert handshakes(log) == 1
    finally:
        await tools.aclose()


async def test_a_call_times_out_as_configured_and_the_connection_stays(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    tools = registry({"one": stdio("one", log, call_timeout_s=0.5)})
    ctx = ToolContext(tmp_path)
    try:
        slow = await tools.run("one__wait", {"until": str(tmp_path / "never")}, ctx)
        assert slow.is_error
        assert "MCP server 'one': no answer within 0.5 s while calling `wait`" in str(slow.content)
        quick = await tools.run("one__echo", {"text": "still here"}, ctx)
        assert not quick.is_error and handshakes(log) == 1
    finally:
        await tools.aclose()


async def test_a_refused_header_is_reported_without_its_secret(tmp_path: Path) -> None:
    async with running_http_server("web", tmp_path / "web.log") as web:
        wrong = f"Bearer not-the-{HTTP_TOKEN}"
        tools = registry({"web": http_server(web.port, headers={"Authorization": wrong})})
        try:
            result = await tools.run("web__echo", {"text": "x"}, ToolContext(tmp_path))
        finally:
            await tools.aclose()
    text = str(result.content)
    assert result.is_error and "MCP server 'web': could not connect" in text, text
    assert HTTP_TOKEN not in text and "not-the-" not in text
