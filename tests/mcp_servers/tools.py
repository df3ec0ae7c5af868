"""The MCP server the tests talk to, over stdio or streamable HTTP (written with the `mcp` SDK).

It records what a test needs to see from the server's side in a log file (`--log`), one
line per event: `process <pid>` when it starts, `handshake <method>` for each connection a
client opens (`initialize`, or `server/discover` for the stateless protocol), `call <tool>`
for each tool call. A test counts connections from it without asking the client.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

HANDSHAKES = ("initialize", "server/discover")
"""The first request of a connection: the handshake, or discovery (stateless protocol)."""


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, line: str) -> None:
        # One short write per line on an O_APPEND file: lines of concurrent writers never mix.
        with self.path.open("a") as out:
            out.write(line + "\n")


def build(name: str, log: Log) -> MCPServer:
    log.write(f"process {os.getpid()}")

    async def record(ctx: Any, call_next: Any) -> Any:
        if ctx.method in HANDSHAKES:
            log.write(f"handshake {ctx.method}")
        elif ctx.method == "tools/call":
            log.write(f"call {(ctx.params or {}).get('name')}")
        return await call_next(ctx)

    server = MCPServer(name, middleware=[record], log_level="WARNING")

    @server.tool(description="Return the text, prefixed with the server's name.")
    def echo(text: str) -> str:
        return f"{name} says: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(
        description="Wait until the file `until` exists (or `seconds` pass), then say so. "
        "Writes `<until>.waiting` with the server's pid when it starts waiting."
    )
    async def wait(until: str, seconds: float = 120.0) -> str:
        flag = Path(until)
        Path(f"{until}.waiting").write_text(str(os.getpid()))
        deadline = asyncio.get_running_loop().time() + seconds
        while not flag.exists() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        return "released" if flag.exists() else "timed out"

    @server.tool(description="Always fails.")
    def broken() -> str:
        raise ValueError("this tool always fails")

    return server
