"""A call waiting for approval survives a restart of the Temporal server (and its worker
reconnecting): approved afterwards, it runs once and the run finishes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from approval_support import ASK_BASH, bash_call, calls_then_text, waiting_calls
from support import eventually, open_stack
from temporalio.service import RPCError

from duragent.client.connection import connect_temporal
from duragent.client.errors import DuragentError
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

SCRIPT = calls_then_text([bash_call("echo ran >> out.txt", "call_write")], "Done after it.")


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_dev_server_restarted_while_a_call_waits(tmp_path: Path, how: str) -> None:
    db_file = tmp_path / "temporal" / "temporal.db"
    server = DevServer(db_file)
    await server.astart()
    try:
        settings = Settings.from_env(home=tmp_path, temporal_address=server.address)
        temporal = await connect_temporal(settings)
        home = tmp_path / "home"
        home.mkdir()
        async with open_stack(home, temporal, server.address, SCRIPT) as stack:
            session = await stack.client.sessions.create()
            stack.spawn_worker()
            await stack.client.approvals.set_policy(session.id, ASK_BASH)
            run = await stack.client.runs.prompt(session.id, "write it")
            await waiting_calls(stack, session.id)
            if how == "stop":
                await server.astop()
            else:
                server.kill()
            server = DevServer(db_file, port=server.port)
            await server.astart()

            # The same clients and worker, reconnected: the call still waits.
            async def still_waiting() -> bool:
                try:
                    pending = await stack.client.approvals.pending(session.id)
                except (DuragentError, RPCError):
                    return False  # not reconnected yet
                return [p.call_id for p in pending] == ["call_write"]

            await eventually(still_waiting, timeout=60)
            await stack.client.approvals.approve(session.id, "call_write")
            result = await asyncio.wait_for(run.result(), timeout=60)
            assert result.status == "completed", result.error
            assert result.final_text == "Done after it."
            assert (Path(session.workspace) / "out.txt").read_text() == "ran\n"
    finally:
        server.stop()
