"""Sticky workspaces: worker processes as hosts, each with a workspaces root of its own.
A session's tool calls run on its host; a run waits for a gone host (and says so), goes
on when it is back, and ends with a clear error when it is not back in time; a session
moves to another host with its workspace."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from checks import assert_session_sound, events_of, expect, wait_for_event
from hosts_support import Host, hosts, start_host, stop_host
from support import UNTIL_GO, Stack, eventually, transcript_roles

from duragent.client.errors import SessionBusy
from duragent.client.hosts import MoveFailed
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.domain.runs import RunOptions

BASH = "bash"


def bash(command: str) -> dict[str, object]:
    return {"reply": [{"tool_use": {"name": BASH, "input": {"command": command}}}]}


def text(answer: str) -> dict[str, object]:
    return {"reply": [{"text": answer}]}


def options(stack: Stack, *, wait_s: float = 60.0) -> RunOptions:
    """The stack's run options, with a host counted as gone after a second untaken."""
    return stack.client.runs.default_options().model_copy(
        update={"host_check_s": 1.0, "host_wait_s": wait_s}
    )


def tool_hosts(stack: Stack, session_id: str) -> list[str | None]:
    """The host each tool call of the session ran on, as its start event says."""
    return [e["host"] for e in events_of(stack, session_id, "tool_execution_start")]


def results(stack: Stack, session_id: str) -> list[str]:
    return [
        text_of(e.message.content)
        for e in stack.client.sync.tree.path(session_id)
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]


def workspace_on(host: Host, name: str) -> Path:
    return host.workspaces / name


@pytest.mark.script(
    {"conversations": {"*": [bash("pwd > where.txt; echo $PWD"), bash("ls"), text("Done.")]}}
)
async def test_each_tool_call_runs_on_its_sessions_host(stack: Stack) -> None:
    a, b = hosts(stack, "host-a", "host-b")
    start_host(stack, a)
    start_host(stack, b)
    on_a = await stack.client.sessions.create(host=a.name, workspace=workspace_on(a, "one"))
    on_b = await stack.client.sessions.create(host=b.name, workspace=workspace_on(b, "two"))
    unplaced = await stack.client.sessions.create()  # its first run's worker's host
    runs = [await stack.client.runs.prompt(s.id, "work") for s in (on_a, on_b, unplaced)]
    done = await asyncio.wait_for(asyncio.gather(*(r.result() for r in runs)), timeout=60)
    assert [r.status for r in done] == ["completed"] * 3, [r.error for r in done]

    assert tool_hosts(stack, on_a.id) == [a.name, a.name]
    assert tool_hosts(stack, on_b.id) == [b.name, b.name]
    assert (workspace_on(a, "one") / "where.txt").read_text().strip() == str(workspace_on(a, "one"))
    assert (workspace_on(b, "two") / "where.txt").is_file()
    placed = (await stack.client.sessions.get(unplaced.id)).host
    assert placed in (a.name, b.name)
    assert tool_hosts(stack, unplaced.id) == [placed, placed]
    for session in (on_a, on_b, unplaced):
        assert_session_sound(stack, session.id)


@pytest.mark.script({"conversations": {"*": [bash("echo ran >> ran.txt"), text("Done.")]}})
async def test_a_run_waits_for_its_gone_host_and_goes_on_when_it_is_back(stack: Stack) -> None:
    a, b = hosts(stack, "host-a", "host-b")
    start_host(stack, a)  # b is down: the run's workflow runs on a, its tool waits for b
    session = await stack.client.sessions.create(host=b.name, workspace=workspace_on(b, "s"))
    run = await stack.client.runs.prompt(session.id, "work", options=options(stack))

    await wait_for_event(stack, session.id, "host_waiting", host=b.name, waiting=True)
    status = await stack.client.sessions.status(session.id)
    assert (status.phase, status.awaiting_host) == ("awaiting_host", b.name)
    code, out, _ = await stack.cli("status", session.id)
    assert code == 0
    expect(f"waiting for host {b.name}" in out, out)
    assert not workspace_on(b, "s").exists()  # nothing ran anywhere meanwhile

    start_host(stack, b)
    result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert tool_hosts(stack, session.id) == [b.name]
    assert (workspace_on(b, "s") / "ran.txt").read_text() == "ran\n"  # once
    assert events_of(stack, session.id, "host_waiting", waiting=False)
    assert (await stack.client.sessions.status(session.id)).phase == "idle"
    assert_session_sound(stack, session.id)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"tool_use": {"name": BASH, "input": {"command": "echo a >> ran.txt"}}},
                        {
                            "tool_use": {
                                "name": BASH,
                                "input": {"command": f"echo b >> ran.txt; {UNTIL_GO}"},
                            }
                        },
                    ]
                },
                text("Done."),
            ]
        }
    }
)
async def test_calls_of_a_turn_lost_with_its_host_never_run_twice(stack: Stack) -> None:
    """The turn's activity ran the calls on the session's host, whose worker then died;
    its retry is not taken in time, so the run goes on with the calls as activities of
    their own, waiting for the host: once it is back, the call that finished keeps its
    result and the one that was cut short says so. Neither runs again."""
    (b,) = hosts(stack, "host-b")
    start_host(stack, b)
    session = await stack.client.sessions.create(host=b.name, workspace=workspace_on(b, "s"))
    ran = workspace_on(b, "s") / "ran.txt"
    async with stack.worker():  # another host's worker: it sees b's lease lapse
        run = await stack.client.runs.prompt(session.id, "work", options=options(stack))
        await eventually(lambda: ran.is_file() and ran.read_text().count("\n") == 2)
        await wait_for_event(stack, session.id, "tool_execution_end")  # the first's result
        stop_host(stack, b)
        await wait_for_event(stack, session.id, "host_waiting", host=b.name, waiting=True)
        start_host(stack, b)
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert sorted(ran.read_text().split()) == ["a", "b"]  # each ran once
    first, second = results(stack, session.id)
    assert first == "(no output)"
    assert "interrupted by a worker failure" in second and "not run again" in second
    assert_session_sound(stack, session.id)


@pytest.mark.script(
    {"conversations": {"*": [bash("echo one > one.txt"), bash(UNTIL_GO), text("never")]}}
)
async def test_a_host_gone_past_the_wait_ends_the_run_with_its_work_saved(stack: Stack) -> None:
    a, b = hosts(stack, "host-a", "host-b")
    start_host(stack, a)
    start_host(stack, b)
    session = await stack.client.sessions.create(host=b.name, workspace=workspace_on(b, "s"))
    run = await stack.client.runs.prompt(session.id, "work", options=options(stack, wait_s=2.0))
    await wait_for_event(stack, session.id, "tool_execution_start", host=b.name, timeout=60)
    await eventually(lambda: len(tool_hosts(stack, session.id)) == 2, timeout=60)
    stop_host(stack, b)  # mid-call, for good

    result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "error"
    assert result.error is not None
    expect(f"host '{b.name}'" in result.error and "2 s" in result.error, result.error)
    path = assert_session_sound(stack, session.id, status="error")
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant", "toolResult"]
    first, second = results(stack, session.id)
    assert "gone" not in first  # the first call ran on b and its result is kept
    assert (workspace_on(b, "s") / "one.txt").read_text() == "one\n"
    expect(f"host '{b.name}' was gone" in second, second)
    assert (await stack.client.runs.list(session.id))[0].error == result.error
    # The gone host's command outlived its worker, as on a machine cut off: let it end.
    (workspace_on(b, "s") / "go").touch()


@pytest.mark.script({"conversations": {"*": [bash("echo ran > ran.txt"), text("never")]}})
async def test_abort_while_waiting_for_a_host(stack: Stack) -> None:
    (a,) = hosts(stack, "host-a")
    start_host(stack, a)
    session = await stack.client.sessions.create(host="host-gone", workspace=workspace_on(a, "s"))
    await stack.client.runs.prompt(session.id, "work", options=options(stack))
    await wait_for_event(stack, session.id, "host_waiting", host="host-gone", waiting=True)

    result = await asyncio.wait_for(stack.client.runs.abort(session.id), timeout=30)
    assert result.status == "aborted"
    assert_session_sound(stack, session.id, status="aborted")
    assert not workspace_on(a, "s").exists()


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                bash("mkdir -p notes && echo kept > notes/a.txt && ln -s notes/a.txt link"),
                text("Written."),
                bash("cat link"),
                text("Read."),
            ]
        }
    }
)
async def test_move_copies_the_workspace_to_the_new_host(stack: Stack) -> None:
    a, b = hosts(stack, "host-a", "host-b")
    start_host(stack, a)
    start_host(stack, b)
    old, new = workspace_on(a, "s"), workspace_on(b, "moved")
    session = await stack.client.sessions.create(host=a.name, workspace=old)
    first = await stack.client.runs.prompt(session.id, "write")
    assert (await asyncio.wait_for(first.result(), timeout=60)).status == "completed"

    code, out, err = await stack.cli("move", session.id, b.name, "--workspace", str(new))
    expect(code == 0, out + err)
    assert f"is on host {b.name}" in out
    moved = await stack.client.sessions.get(session.id)
    assert (moved.host, moved.workspace) == (b.name, str(new))
    assert (new / "notes" / "a.txt").read_text() == "kept\n"
    assert (new / "link").is_symlink()
    assert (old / "notes" / "a.txt").is_file()  # the old host's copy is left alone

    second = await stack.client.runs.prompt(session.id, "read")
    assert (await asyncio.wait_for(second.result(), timeout=60)).status == "completed"
    assert tool_hosts(stack, session.id) == [a.name, b.name]
    assert results(stack, session.id)[-1].startswith("kept")


@pytest.mark.script({"conversations": {"*": [bash(UNTIL_GO), text("Done.")]}})
async def test_move_is_refused_while_a_run_is_in_progress_or_a_host_is_down(
    stack: Stack,
) -> None:
    (a,) = hosts(stack, "host-a")
    start_host(stack, a)
    session = await stack.client.sessions.create(host=a.name, workspace=workspace_on(a, "s"))
    run = await stack.client.runs.prompt(session.id, "wait")
    await wait_for_event(stack, session.id, "tool_execution_start", timeout=60)
    with pytest.raises(SessionBusy):
        await stack.client.hosts.move(session.id, "host-b", copy=False)
    (workspace_on(a, "s") / "go").touch()
    assert (await asyncio.wait_for(run.result(), timeout=60)).status == "completed"

    with pytest.raises(MoveFailed, match="'host-c': host 'host-c' is not up"):
        await stack.client.hosts.move(session.id, "host-c", start_within_s=1.0)
    assert (await stack.client.sessions.get(session.id)).host == a.name  # nothing changed

    code, _, err = await stack.cli("move", session.id, "no such host")
    assert code == 2
    assert "is not a host name" in err

    moved = await stack.client.hosts.move(session.id, "host-c", copy=False)
    assert (moved.host, moved.copied_files) == ("host-c", 0)
    assert (await stack.client.sessions.get(session.id)).host == "host-c"
