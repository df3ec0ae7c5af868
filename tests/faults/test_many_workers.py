"""Three worker processes as three hosts on one PostgreSQL store, 30 sessions at once:
every session's tool calls run on its own host; one worker is SIGKILLed mid-run and
restarted: its sessions resume and finish, the others finish untouched, and nothing is
lost or done twice.

A model call cut by the kill is asked again and the offline model plays its next step,
as a real model may answer differently: so how many tool turns a session takes is not
fixed, and the checks hold whatever it is."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from checks import assert_session_sound, events_of, expect
from hosts_support import hosts, start_host, stop_host
from support import Stack, eventually

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage, ToolResultMessage
from duragent.store.records import SessionRecord

SESSIONS_PER_HOST = 10


def step(reply: dict[str, Any], delay_ms: int) -> dict[str, Any]:
    return {"delay_ms": delay_ms, "reply": [reply]}


def bash(command: str) -> dict[str, Any]:
    return {"tool_use": {"name": "bash", "input": {"command": command}}}


SCRIPT = {
    "conversations": {
        "*": [
            step(bash("echo 1 >> log.txt"), 100),
            step(bash("echo 2 >> log.txt"), 100),
            # Slow enough that a session of the killed host is still running when it dies.
            step({"text": "Done."}, 1500),
        ]
    }
}


def tool_hosts(stack: Stack, session_id: str) -> set[str | None]:
    return {e["host"] for e in events_of(stack, session_id, "tool_execution_start")}


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
@pytest.mark.script(SCRIPT)
async def test_three_hosts_one_killed_and_restarted(stack: Stack) -> None:
    a, b, c = hosts(stack, "host-a", "host-b", "host-c")
    for host in (a, b, c):
        start_host(stack, host)
    placed = {
        host.name: [
            await stack.client.sessions.create(host=host.name, workspace=host.workspaces / f"s{i}")
            for i in range(SESSIONS_PER_HOST)
        ]
        for host in (a, b, c)
    }
    everyone = [s for sessions in placed.values() for s in sessions]
    runs = [await stack.client.runs.prompt(s.id, "count") for s in everyone]

    # Every session of host c is past its first tool call's start: then kill c.
    def c_started() -> bool:
        return all(events_of(stack, s.id, "tool_execution_start") for s in placed[c.name])

    await eventually(c_started, timeout=120, interval=0.2)
    running = [
        s for s in placed[c.name] if (await stack.client.runs.list(s.id))[0].status == "running"
    ]
    stop_host(stack, c)
    expect(bool(running), "every session of host c had finished before it was killed")
    start_host(stack, c)

    results = await asyncio.wait_for(asyncio.gather(*(r.result() for r in runs)), timeout=240)
    assert [r.status for r in results] == ["completed"] * len(everyone), [
        r.error for r in results if r.status != "completed"
    ]
    for host_name, sessions in placed.items():
        for session in sessions:
            assert_session_sound(stack, session.id)
            expect(tool_hosts(stack, session.id) == {host_name}, f"{session.id} on {host_name}")
            calls = bash_calls(stack, session)
            written = (Path(session.workspace) / "log.txt").read_text().splitlines()
            # Nothing ran twice; every call that says it ran did, once.
            assert len(written) == len(set(written)), f"a call ran twice: {written}"
            ran = [number for number, interrupted in calls if not interrupted]
            assert set(ran) <= set(written) <= {number for number, _ in calls}
            if host_name != c.name:  # the others' tool calls never noticed
                assert all(not interrupted for _, interrupted in calls)


def bash_calls(stack: Stack, session: SessionRecord) -> list[tuple[str, bool]]:
    """Each bash call of the session: the number it appends to log.txt, and whether its
    result says it was interrupted (cut by the kill, not run again)."""
    path = stack.client.sync.tree.path(session.id)
    numbers = {
        call.id: str(call.arguments["command"]).split()[1]
        for e in path
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
        for call in e.message.tool_calls
    }
    return [
        (numbers[m.tool_call_id], bool((m.details or {}).get("interrupted")))
        for e in path
        if isinstance(e, MessageEntry) and isinstance((m := e.message), ToolResultMessage)
    ]
