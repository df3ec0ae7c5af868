"""SQLite's disk refuses writes while a finished reply is to be stored: the worker says so
in words, nothing is half-written, and the run goes on once there is room again, with the
reply kept (the model is not asked twice).

The disk is the worker process's file size limit (RLIMIT_FSIZE, set from here with
`prlimit` and lifted the same way): SQLite's writes past it fail as they do on a full
disk, and no mount or root is needed."""

from __future__ import annotations

import asyncio
import resource

import pytest
from checks import assert_session_sound, worker_log
from support import Stack, eventually, transcript_roles

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import text_of

LONG_REPLY = "A long answer that needs room on the disk to be stored. " * 4000  # 220 KB
ROOM_BYTES = 64 * 1024
"""The worker's file size limit while the disk is "full": far below what the reply needs."""


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},
                {"wait_for": "reply", "reply": [{"text": LONG_REPLY}]},
            ]
        }
    }
)
async def test_a_full_disk_while_storing_a_reply_loses_nothing(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    worker = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "list, then tell me about it")
    await eventually(lambda: len(stack.model.requests_for(session.id)) == 2, timeout=60)
    resource.prlimit(worker.pid, resource.RLIMIT_FSIZE, (ROOM_BYTES, resource.RLIM_INFINITY))
    stack.model.release("reply")
    await eventually(lambda: "store's disk is full while" in worker_log(stack), timeout=60)
    # Nothing of the reply is stored while the disk refuses it: no partial message.
    assert transcript_roles(await stack.client.tree.path(session.id)) == [
        "user",
        "assistant",
        "toolResult",
    ]
    assert worker.poll() is None and "Traceback" not in worker_log(stack)

    resource.prlimit(
        worker.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    )
    result = await asyncio.wait_for(run.result(), timeout=90)
    assert result.status == "completed", result.error
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    final = path[-1]
    assert isinstance(final, MessageEntry) and text_of(final.message.content) == LONG_REPLY
    # The reply was kept through the wait, not asked for again.
    assert len(stack.model.requests_for(session.id)) == 2
    stack.kill(worker)
