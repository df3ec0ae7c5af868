"""A worker SIGKILLed moments after `bash` spawned its shell: before the group was in any
heartbeat. A new worker takes the call over; nothing of the command survives, and its
result says what is known (interrupted, whether the command had started, what was
stopped)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from checks import assert_session_sound, tool_results
from support import Stack, eventually

from duragent.activities.tools import process_group_alive
from duragent.activities.tools.sandbox import BwrapSandbox, SandboxUnavailable
from duragent.domain.messages import text_of

TOKEN = uuid.uuid4().hex
# The token puts the command in the shell's command line, where the test finds it.
COMMAND = f"echo started >> log.txt; sleep 60; echo finished >> log.txt  # {TOKEN}"
SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "bash", "input": {"command": COMMAND}}}]},
            {"reply": [{"text": "It was interrupted; I will check before running it again."}]},
        ]
    }
}


def processes_with(token: str) -> list[int]:
    """Live processes whose command line holds `token`: the command's shell (and, in
    the sandbox, the bwrap processes around it, the first of them the group's leader)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[-1].split()[0]
        except OSError:
            continue  # exited while we looked
        if token.encode() in cmdline and state != b"Z":
            found.append(int(entry.name))
    return found


async def shell_spawned(timeout: float = 60.0) -> int:
    """The pid of the command's shell, as soon as it exists (polled without pause: the
    offsets below count from here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = processes_with(TOKEN)
        if pids:
            return min(pids)
        await asyncio.sleep(0)
    raise AssertionError(f"the shell did not appear within {timeout} s")


def _no_sandbox() -> str | None:
    try:
        BwrapSandbox.create([])
    except SandboxUnavailable as exc:
        return str(exc)
    return None


NO_SANDBOX = _no_sandbox()
SANDBOXED = pytest.param(
    30,
    "bwrap",
    marks=pytest.mark.skipif(bool(NO_SANDBOX), reason=f"no sandbox here: {NO_SANDBOX}"),
    id="30-bwrap",
)


@pytest.mark.parametrize(
    ("offset_ms", "sandbox"),
    [(0, "none"), (10, "none"), (30, "none"), (60, "none"), (100, "none"), SANDBOXED],
)
@pytest.mark.script(SCRIPT)
async def test_worker_killed_just_after_bash_spawned(
    stack: Stack, offset_ms: int, sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sandboxed command also dies with its worker (bwrap --die-with-parent).
    monkeypatch.setenv("DURAGENT_TOOL_SANDBOX", sandbox)
    session = await stack.client.sessions.create()
    log = Path(session.workspace) / "log.txt"
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "run the slow thing")
    pgid = await shell_spawned()
    program = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")[0]
    try:
        assert program.endswith(b"bwrap") == (sandbox == "bwrap"), program
        await asyncio.sleep(offset_ms / 1000)  # the deliberate offset
        stack.kill(first)
        second = stack.spawn_worker()
        result = await asyncio.wait_for(run.result(), timeout=60)
        stack.kill(second)

        assert result.status == "completed", result.error
        path = assert_session_sound(stack, session.id)
        bash = tool_results(path)["bash"]
        text = text_of(bash.content)
        details = bash.details or {}
        assert bash.is_error and "interrupted by a worker failure" in text, text
        assert details.get("interrupted") is True
        # Nothing of the command survives the takeover, now or later.
        assert not process_group_alive(pgid), f"process group {pgid} survived: {text}"
        assert not processes_with(TOKEN)
        # What the result says matches what happened.
        ran = log.exists()
        assert details.get("started") in (True, False), text
        if details["started"] and sandbox == "none":
            assert "had started" in text and "was stopped" in text, text
            assert details.get("stopped") == [pgid]
        elif details["started"]:
            assert "had started" in text, text
            assert "was stopped" in text or "had already ended" in text, text
        else:
            assert "had not started" in text and not ran, text
        if ran:
            assert details["started"], text
        assert not ran or log.read_text() == "started\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # never leave the test's command behind


ABORT_TOKEN = uuid.uuid4().hex
ABORTED_SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {
                        "tool_use": {
                            "name": "bash",
                            "input": {
                                "command": f"echo started >> log.txt; sleep 600  # {ABORT_TOKEN}"
                            },
                        }
                    }
                ]
            },
        ]
    }
}


@pytest.mark.script(ABORTED_SCRIPT)
async def test_a_run_aborted_while_no_worker_lives_has_its_orphan_stopped(stack: Stack) -> None:
    """The worker running a tool dies; the run is aborted before any worker is back, so
    no next attempt of the call ever runs to stop what the dead worker left. The next
    worker on the machine stops it anyway: it sweeps the dead workers' records."""
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    await stack.client.runs.prompt(session.id, "run it")
    log = Path(session.workspace) / "log.txt"
    await eventually(lambda: log.exists() and bool(processes_with(ABORT_TOKEN)), timeout=60)
    stack.kill(first)
    assert processes_with(ABORT_TOKEN), "the command dies with its worker: nothing to test"

    aborting = asyncio.create_task(stack.client.runs.abort(session.id))
    stack.spawn_worker()
    result = await asyncio.wait_for(aborting, timeout=60)
    assert result.status == "aborted"
    await eventually(lambda: not processes_with(ABORT_TOKEN), timeout=30)
    assert log.read_text() == "started\n"
    # A record still there says it was swept (a next attempt reports its group stopped).
    for record in stack.settings.tool_processes.glob("*.json"):
        assert '"swept_at":' in record.read_text() and '"swept_at":null' not in record.read_text()
