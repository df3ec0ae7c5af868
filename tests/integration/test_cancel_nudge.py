"""The cancel nudge across processes (`activities.cancel_hints`): the run's steps run in
this process, its tool call in a worker process of another host that runs only tool calls.
Heartbeats are 20 s apart (a third of a 60 s timeout), so an abort or an interrupting
guidance that reaches the call within seconds was carried by the nudge: through the
store's table on SQLite, by PostgreSQL's `NOTIFY` (no row written) on PostgreSQL, where
each worker process holds one listening connection that comes back after a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hosts_support import Host, host_env
from postgres_server import PostgresServer, new_database
from processes import WORKER_ARGS, spawn_python
from sqlalchemy import text
from support import Stack, bash_then_text, eventually, open_stack
from temporalio.client import Client

from duragent.activities.tools import process_group_alive
from duragent.temporal_dev import DevServer

BOUND_S = 2.0
"""Generous: a nudged call is stopped in about 0.1 s; without the nudge, in 20 s."""

COMMAND = "echo $$ > pid.txt; sleep 60"


LISTENERS = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
    " AND application_name = 'duragent-cancel-hints' AND query <> ''"
)
"""The connections that listen for cancel hints on the stack's database (named so for
whoever reads `pg_stat_activity`; a first statement sent: it is the `LISTEN`)."""

LOST_WARNING = "cancel hints: the listening connection to PostgreSQL is down"


@pytest.fixture
async def tool_host(stack: Stack) -> AsyncIterator[Host]:
    yield spawn_tool_host(stack)


def spawn_tool_host(stack: Stack) -> Host:
    """A worker process serving only host `tools`; this process's worker serves the runs
    (as host `runs`), both with a 60 s heartbeat timeout."""
    stack.settings = stack.settings.model_copy(update={"heartbeat_timeout_s": 60.0, "host": "runs"})
    stack.client.settings = stack.settings
    host = Host("tools", stack.settings.home / "host-tools")
    host.home.mkdir()
    env = host_env(stack, host)
    env["DURAGENT_HOST_ONLY"] = "true"
    log = open(host.home / "worker.log", "wb")  # noqa: SIM115
    host.process = spawn_python(WORKER_ARGS, env, log)
    stack.processes.append(host.process)
    return host


async def running_command(stack: Stack, host: Host, prompt: str) -> tuple[str, int]:
    """A session on the tool host whose bash call is running: its id and process group."""
    session = await stack.client.sessions.create(host=host.name, workspace=host.workspaces / "s")
    await stack.client.runs.prompt(session.id, prompt)
    pid_file = Path(session.workspace) / "pid.txt"
    await eventually(lambda: pid_file.exists() and bool(pid_file.read_text()), timeout=60)
    return session.id, int(pid_file.read_text())


async def stopped_within(pgid: int) -> float:
    """Seconds until the process group is gone (failing past the bound)."""
    began = time.monotonic()
    await eventually(lambda: not process_group_alive(pgid), timeout=BOUND_S, interval=0.01)
    return time.monotonic() - began


@pytest.mark.script(bash_then_text(COMMAND, "unused"))
async def test_an_abort_reaches_a_call_in_another_process(stack: Stack, tool_host: Host) -> None:
    async with stack.worker():
        session_id, pgid = await running_command(stack, tool_host, "run it")
        abort = asyncio.create_task(stack.client.runs.abort(session_id))
        await stopped_within(pgid)
        result = await asyncio.wait_for(abort, timeout=30)
    assert result.status == "aborted"


@pytest.mark.script(bash_then_text(COMMAND, "Doing it differently."))
async def test_an_interrupting_guidance_reaches_a_call_in_another_process(
    stack: Stack, tool_host: Host
) -> None:
    async with stack.worker():
        session_id, pgid = await running_command(stack, tool_host, "run it")
        await stack.client.inputs.guide_text(
            session_id, "stop, do it differently", intent="interrupt"
        )
        await stopped_within(pgid)
        result = await asyncio.wait_for(stack.client.runs.wait(session_id), timeout=30)
    assert result.status == "completed", result.error
    assert result.final_text == "Doing it differently."


def listeners(stack: Stack) -> int:
    with stack.db.transaction() as db:
        return int(db.scalar(LISTENERS) or 0)


def hint_rows(stack: Stack) -> int:
    with stack.db.transaction() as db:
        return int(db.scalar(text("SELECT count(*) FROM cancel_hints")) or 0)


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
@pytest.mark.script(bash_then_text(COMMAND, "unused"))
async def test_on_postgresql_an_abort_reaches_another_process_by_notify_alone(
    stack: Stack, tool_host: Host
) -> None:
    async with stack.worker():
        session_id, pgid = await running_command(stack, tool_host, "run it")
        # One listening connection per worker process: this one's and the tool host's.
        await eventually(lambda: listeners(stack) == 2, timeout=30)
        abort = asyncio.create_task(stack.client.runs.abort(session_id))
        await stopped_within(pgid)
        result = await asyncio.wait_for(abort, timeout=30)
        assert listeners(stack) == 2
    assert result.status == "aborted"
    assert hint_rows(stack) == 0


async def test_the_listening_connections_come_back_after_postgresql_restarts(
    own_postgres: PostgresServer, tmp_path: Path, temporal: Client, dev_server: DevServer
) -> None:
    server = own_postgres.start()
    try:
        url = new_database(server.url)
        script = bash_then_text(COMMAND, "unused")
        async with open_stack(tmp_path, temporal, dev_server.address, script, url) as stack:
            tool_host = spawn_tool_host(stack)
            assert tool_host.process is not None
            log = tool_host.home / "worker.log"
            async with stack.worker():
                session_id, pgid = await running_command(stack, tool_host, "run it")
                await eventually(lambda: listeners(stack) == 2, timeout=30)

                server.halt()
                await eventually(lambda: LOST_WARNING in log.read_text(), timeout=30)
                server.resume()
                await eventually(lambda: listeners(stack) == 2, timeout=30)

                abort = asyncio.create_task(stack.client.runs.abort(session_id))
                await stopped_within(pgid)
                result = await asyncio.wait_for(abort, timeout=60)
            assert result.status == "aborted"
            assert tool_host.process.poll() is None  # the lost connection crashed nothing
            assert log.read_text().count(LOST_WARNING) == 1  # one warning for the outage
            assert hint_rows(stack) == 0
    finally:
        server.stop()
