"""What the MCP tests share: the test servers (tests/mcp_servers/), their config, a worker
registry with their tools, and reading what a server logged."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from processes import REPO, kill_group

from duragent.activities.mcp.config import McpConfig
from duragent.activities.mcp.tools import mcp_providers
from duragent.activities.tools import ToolRegistry, default_tools

SERVERS = REPO / "tests" / "mcp_servers"
HTTP_TOKEN = "test-secret-token-4711"


def stdio_server(name: str, log: Path, **extra: Any) -> dict[str, Any]:
    """A config entry for the stdio test server `name`, logging to `log`."""
    return {
        "command": sys.executable,
        "args": [str(SERVERS / "stdio_server.py"), name, str(log)],
    } | extra


def http_server(port: int, **extra: Any) -> dict[str, Any]:
    """A config entry for the HTTP test server on `port`, with its bearer token."""
    return {
        "url": f"http://127.0.0.1:{port}/mcp",
        "headers": {"Authorization": f"Bearer {HTTP_TOKEN}"},
    } | extra


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"servers": servers}))
    return path


def registry(servers: dict[str, Any]) -> ToolRegistry:
    """The built-in tools and the servers' tools, as a worker built from the file has."""
    return ToolRegistry(
        default_tools(), mcp_providers(McpConfig.model_validate({"servers": servers}))
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """The HTTP test server as a child process: started, killed, started again on its port."""

    def __init__(self, name: str, log: Path, port: int | None = None) -> None:
        self.name, self.log, self.port = name, log, port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        args = [
            str(SERVERS / "http_server.py"),
            self.name,
            str(self.log),
            str(self.port),
            HTTP_TOKEN,
        ]
        self.process = subprocess.Popen(
            [sys.executable, *args], cwd=REPO, start_new_session=True, stderr=subprocess.DEVNULL
        )
        while not await _accepts(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"the HTTP test server exited with {self.process.returncode}")
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            kill_group(self.process)
            self.process.wait()


async def _accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


@contextlib.asynccontextmanager
async def running_http_server(name: str, log: Path) -> AsyncIterator[HttpServer]:
    server = HttpServer(name, log)
    await server.start()
    try:
        yield server
    finally:
        server.kill()


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def handshakes(log: Path) -> int:
    """Connections clients opened to the server (its log counts each handshake)."""
    return sum(1 for line in log_lines(log) if line.startswith("handshake "))


def processes(log: Path) -> list[int]:
    """The pids of the server processes started so far."""
    return [int(line.split()[1]) for line in log_lines(log) if line.startswith("process ")]


def calls(log: Path, tool: str) -> int:
    return sum(1 for line in log_lines(log) if line == f"call {tool}")
