"""The Temporal server goes away mid-run (stopped, or killed) and a new one starts on the
same SQLite file and port. The run's history survives; the worker and the client
reconnect by themselves, and the tool call running through the outage is not run twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal

import pytest
from checks import (
    allow_run_end,
    assert_session_sound,
    database_file,
    database_locked,
    events_of,
    expect,
    finish_refused,
    model_requests,
    refuse_run_end,
    run_events,
    tool_results,
    wait_for_event,
)
from support import Stack, open_stack, transcript_roles

from duragent.client.connection import connect_temporal
from duragent.domain.entries import SessionEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

FINAL = "Done despite the outage."
HEARTBEAT_TIMEOUT_S = 3.0
"""The calls' heartbeat timeout here: the outages are timed against it."""


def bash_then_final(command: str) -> dict[str, object]:
    return {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
                {"reply": [{"text": FINAL}]},
            ]
        }
    }


class Outage:
    """A private dev server that a test can take down and bring back (same file, port)."""

    def __init__(self, db_file: Path) -> None:
        self.db_file = db_file
        self.server = DevServer(db_file)
        self.down_at = 0.0
        self.up_at = 0.0

    async def begin(self, how: Literal["stop", "kill"]) -> None:
        if how == "stop":
            await self.server.astop()  # SIGTERM: a clean shutdown
        else:
            self.server.kill()  # SIGKILL: a crash
        self.down_at = time.time()

    async def end(self) -> None:
        self.server = DevServer(self.db_file, port=self.server.port)
        self.up_at = time.time()
        await self.server.astart()


@asynccontextmanager
async def private_stack(
    tmp_path: Path, script: dict[str, object]
) -> AsyncIterator[tuple[Stack, Outage]]:
    """A stack on a dev server of its own, which the test may take down."""
    outage = Outage(tmp_path / "temporal" / "temporal.db")
    await outage.server.astart()
    try:
        address = outage.server.address
        settings = Settings.from_env(home=tmp_path, temporal_address=address)
        temporal = await connect_temporal(settings)
        home = tmp_path / "home"
        home.mkdir()
        async with open_stack(
            home, temporal, address, script, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S
        ) as stack:
            yield stack, outage
    finally:
        outage.server.stop()


async def run_through_outage(
    stack: Stack, outage: Outage, how: Literal["stop", "kill"], down_until: float
) -> tuple[str, list[SessionEntry], ToolResultMessage]:
    """Start a run, take the server down once bash runs, bring it back `down_until` s after
    the call started; the run must complete on the same worker and client."""
    session = await stack.client.sessions.create()
    worker = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "run it")
    await wait_for_event(stack, session.id, "tool_execution_start", tool_name="bash")
    started = time.monotonic()
    await outage.begin(how)
    await asyncio.sleep(max(0.0, started + down_until - time.monotonic()))
    await outage.end()

    result = await asyncio.wait_for(run.result(), timeout=40)  # the client from before
    assert worker.poll() is None, "the worker died with the server"
    stack.kill(worker)
    assert result.status == "completed", result.error
    assert result.final_text == FINAL
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    # Run once: the command began once, and was never started again.
    assert (Path(session.workspace) / "log.txt").read_text() == "begun\n"
    assert [s["attempt"] for s in events_of(stack, session.id, "tool_execution_start")] == [1]
    assert len(model_requests(stack, session.id)) == 2
    return session.id, path, tool_results(path)["bash"]


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_temporal_restarted_while_a_tool_runs(
    tmp_path: Path, how: Literal["stop", "kill"]
) -> None:
    """Down for ~1.5-2.5 s of a 4 s command: it finishes after the server is back.

    The outage must stay inside the call's heartbeat timeout: a stop, the wait and a
    start take longer than the suite's 3 s on a loaded machine (the server then times the
    call out as soon as it is back), so these runs get 10 s."""
    command = "echo begun >> log.txt; sleep 4; echo ended"
    async with private_stack(tmp_path, bash_then_final(command)) as (stack, outage):
        stack.settings = stack.settings.model_copy(update={"heartbeat_timeout_s": 10.0})
        stack.client.settings = stack.settings
        _, _, output = await run_through_outage(stack, outage, how, down_until=1.5)
        assert not output.is_error, text_of(output.content)
        assert text_of(output.content) == "ended"


async def test_temporal_down_when_a_tool_finishes(tmp_path: Path) -> None:
    """Down from just after a 2 s command starts until past its heartbeat timeout: the
    command finishes (and its result is staged) while no server can take the report."""
    command = "echo begun >> log.txt; sleep 2; echo ended"
    async with private_stack(tmp_path, bash_then_final(command)) as (stack, outage):
        down_until = HEARTBEAT_TIMEOUT_S + 1.5
        session_id, _, output = await run_through_outage(stack, outage, "kill", down_until)
        ends = [e for e in run_events(stack, session_id) if e.type == "tool_execution_end"]
        assert outage.down_at < ends[0].created_at / 1000 < outage.up_at  # during the outage
        assert ends[0].payload["result"]["content"][0]["text"] == "ended"
        expect(
            not output.is_error and text_of(output.content) == "ended",
            f"the finished call's result was replaced: {text_of(output.content)!r}",
        )


async def test_finish_run_replayed_after_it_committed(tmp_path: Path) -> None:
    """finish_run commits, but its workflow task is never reported (the server is down, then
    the worker dies): the new worker replays the task and runs finish_run again."""
    script = bash_then_final("echo hi >> out.txt")
    async with private_stack(tmp_path, script) as (stack, outage):
        refuse_run_end(database_file(stack))
        session = await stack.client.sessions.create()
        first = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "say hi")
        await finish_refused(stack, session.id)
        # No server to report to, then let finish_run through: its next attempt commits.
        await outage.begin("kill")
        async with database_locked(database_file(stack)) as connection:
            allow_run_end(connection)
        await wait_for_event(stack, session.id, "agent_end")
        await asyncio.sleep(0.3)
        stack.kill(first)
        await outage.end()

        second = stack.spawn_worker()
        result = await asyncio.wait_for(run.result(), timeout=40)
        stack.kill(second)
        assert result.status == "completed", result.error
        assert result.final_text == FINAL
        last = (await stack.client.tree.entries(session.id))[-1].id
        leaf = (await stack.client.sessions.get(session.id)).leaf_id
        expect(
            leaf == last and result.leaf_id == last,
            f"session leaf {leaf}, run result leaf {result.leaf_id}; the last entry is {last}",
        )
        path = assert_session_sound(stack, session.id)
        assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
        assert (Path(session.workspace) / "out.txt").read_text() == "hi\n"
