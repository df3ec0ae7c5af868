"""What an MCP tool call costs beyond a built-in one: a stdio server's trivial tool vs `read`.

Both go through `ToolRegistry.run`, the call `run_tool` makes, alternating, in the same
process and event loop, the MCP server's connection kept open as a worker keeps it (the
first call, which opens it, is reported apart). The registry is where the two paths
differ: what `run_tool` does around it (heartbeats, staging, run events) is the same code
for both, and measuring a whole run would bury a few milliseconds under Temporal's
scheduling noise.

    python bench/mcp_overhead.py [--calls 300]

Last line: `mcp_overhead: X ms` (median MCP call minus median built-in call).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, median, p95

from duragent.activities.mcp.config import McpConfig
from duragent.activities.mcp.tools import mcp_providers
from duragent.activities.tools import ToolContext, ToolRegistry, default_tools


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="duragent-bench-") as tmp:
        workspace = Path(tmp)
        (workspace / "notes.txt").write_text("one line of notes\n")
        server = ROOT / "tests" / "mcp_servers" / "stdio_server.py"
        config = McpConfig.model_validate(
            {
                "servers": {
                    "bench": {
                        "command": sys.executable,
                        "args": [str(server), "bench", str(workspace / "server.log")],
                    }
                }
            }
        )
        tools = ToolRegistry(default_tools(), mcp_providers(config))
        ctx = ToolContext(workspace)
        try:
            began = time.perf_counter()
            await tools.refresh()  # what a turn does first: opens the connection, lists
            connect_ms = (time.perf_counter() - began) * 1000
            builtin: list[float] = []
            mcp: list[float] = []
            for _ in range(calls):
                for name, args, into in (
                    ("read", {"path": "notes.txt"}, builtin),
                    ("bench__echo", {"text": "hi"}, mcp),
                ):
                    began = time.perf_counter()
                    result = await tools.run(name, args, ctx)
                    into.append((time.perf_counter() - began) * 1000)
                    assert not result.is_error, result
        finally:
            await tools.aclose()
    print(f"first listing (starts the server, opens the connection): {connect_ms:.1f} ms")
    print(f"built-in read: median {median(builtin):.2f} ms, p95 {p95(builtin):.2f} ms")
    print(f"MCP stdio echo: median {median(mcp):.2f} ms, p95 {p95(mcp):.2f} ms ({calls} calls)")
    print(f"mcp_overhead: {median(mcp) - median(builtin):.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
