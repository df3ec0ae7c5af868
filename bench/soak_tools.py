"""The soak's tools, loaded by its workers as a plugin (`DURAGENT_PLUGINS=soak_tools:plugin`).

Each execution appends a line `CALL_ID TOOL PID` to the executions file named by
`SOAK_EXECUTIONS`, before it does its work: a call cut by a crash still counts as run.
That file is outside the store, so the soak can tell from it whether a tool that is not
retry-safe ran twice, whatever the store says.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field

import duragent

EXECUTIONS_ENV = "SOAK_EXECUTIONS"
WRITE, READ, DEPLOY = "soak_write", "soak_read", "soak_deploy"
NOT_RETRY_SAFE = frozenset({WRITE, DEPLOY})
"""Tools whose calls must never run twice."""

Seconds = Annotated[float, Field(ge=0, le=60, description="How long the work takes")]


def note_execution(ctx: duragent.ToolContext, tool: str) -> None:
    line = f"{ctx.call_id} {tool} {os.getpid()}\n".encode()
    # One write of a short line to a file opened for appending lands whole, even with three
    # workers writing at once.
    fd = os.open(os.environ[EXECUTIONS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@duragent.tool(name=WRITE)
async def soak_write(ctx: duragent.ToolContext, name: str, seconds: Seconds = 0.5) -> str:
    """Write a record (not retry-safe: a crash reports it as interrupted)."""
    note_execution(ctx, WRITE)
    await asyncio.sleep(seconds)
    (Path(ctx.workspace) / f"{name}.txt").write_text(ctx.call_id)
    return f"wrote {name}"


@duragent.tool(name=READ, retry_safe=True)
async def soak_read(ctx: duragent.ToolContext, name: str, seconds: Seconds = 0.5) -> str:
    """Read records (retry-safe: may run again after a crash)."""
    note_execution(ctx, READ)
    await asyncio.sleep(seconds)
    return f"read {name}: {len(list(Path(ctx.workspace).glob('*.txt')))} records"


@duragent.tool(name=DEPLOY)
async def soak_deploy(ctx: duragent.ToolContext, target: str, seconds: Seconds = 0.5) -> str:
    """Deploy (not retry-safe, and the soak's approval policy asks before each call)."""
    note_execution(ctx, DEPLOY)
    await asyncio.sleep(seconds)
    return f"deployed {target}"


plugin = duragent.Plugin(name="soak", tools=[soak_write, soak_read, soak_deploy])
