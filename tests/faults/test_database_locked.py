"""The session database is unreachable for a while: another connection holds SQLite's
write lock (`BEGIN EXCLUSIVE`) just when the run must store a tool's result, save the turn
or finish the run. A lock shorter than the store's busy timeout (5 s) is waited out; a
longer one fails the store writes, and the activities retry until the database is back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from checks import (
    activity_attempts,
    allow_run_end,
    assert_session_sound,
    database_file,
    database_locked,
    events_of,
    expect,
    finish_refused,
    hold_lock,
    model_requests,
    refuse_run_end,
    tool_results,
    wait_for_event,
    worker_log,
)
from support import Stack, eventually, transcript_roles

from duragent.client.api import RunHandle
from duragent.domain.entries import SessionEntry
from duragent.domain.messages import text_of
from duragent.domain.runs import RunResult
from duragent.offline_model import Script

BUSY_TIMEOUT_S = 5.0
LONG_LOCK_S = BUSY_TIMEOUT_S + 2.0
FINAL = "Stored at last, once the database answered again. " * 4  # 10 streamed chunks
# Python's backtracking makes this cost a few ms per 200-character line: a search of the
# test's small tree runs about a second, long enough to take the lock while it runs.
SLOW_PATTERN = r"\w*\w*needle"


def tool_then_final(tool: str, args: dict[str, Any], **final: Any) -> Script:
    return Script.of(
        [
            {"reply": [{"tool_use": {"name": tool, "input": args}}]},
            {"reply": [{"text": FINAL}], **final},
            {"reply": [{"text": "A second answer to the same request."}]},
        ]
    )


async def finish(
    stack: Stack, run: RunHandle, locked_at: float, seconds: float, *, retry_safe: bool = False
) -> tuple[RunResult, list[SessionEntry]]:
    """Wait for the run; check it completed soundly, after the lock."""
    result = await asyncio.wait_for(run.result(), timeout=40)
    assert result.status == "completed", result.error
    assert time.monotonic() - locked_at >= seconds
    path = assert_session_sound(stack, run.session_id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    ends = events_of(stack, run.session_id, "tool_execution_end")
    if retry_safe:
        # An attempt given up on for its silence may still finish (and say so) later.
        assert 1 <= len(ends) <= 2 and all(e["result"] == ends[0]["result"] for e in ends)
    else:
        assert len(ends) == 1
    return result, path


async def test_a_short_lock_is_waited_out(stack_factory: Any) -> None:
    """3 s, during a bash call: its result's staging and the next save point wait."""
    script = tool_then_final("bash", {"command": "sleep 1.5; echo slept"})
    async with stack_factory(script) as stack:
        session = await stack.client.sessions.create()
        worker = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "store something")
        await wait_for_event(stack, session.id, "tool_execution_start", tool_name="bash")
        locked_at = time.monotonic()
        await hold_lock(database_file(stack), 3.0)
        result, path = await finish(stack, run, locked_at, 3.0)
        assert result.final_text == FINAL
        stack.kill(worker)
        output = tool_results(path)["bash"]
        assert not output.is_error and "slept" in text_of(output.content)
        assert len(model_requests(stack, session.id)) == 2
        # Nothing failed: every activity finished on its first attempt.
        assert set((await activity_attempts(stack, session.id)).values()) == {1}


async def test_a_long_lock_during_a_retry_safe_tool_is_retried_through(
    stack_factory: Any,
) -> None:
    """Longer than the busy timeout, during a grep: staging its result fails, and is
    retried inside the activity, which keeps heartbeating, so the search is not run
    again; the result is stored once the lock is gone."""
    script = tool_then_final("grep", {"pattern": SLOW_PATTERN, "path": "src"})
    async with stack_factory(script) as stack:
        session = await stack.client.sessions.create()
        src = Path(session.workspace) / "src"
        src.mkdir()
        (src / "data.txt").write_text(("a" * 200 + "\n") * 300 + "a needle\n")
        worker = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "search")
        await wait_for_event(stack, session.id, "tool_execution_start", tool_name="grep")
        locked_at = time.monotonic()
        # Held until a store write has failed for it and is being retried: how long the
        # search takes on this machine does not decide whether the lock outlasts the
        # store's busy timeout.
        async with database_locked(database_file(stack)):
            await eventually(
                lambda: "store unavailable while" in worker_log(stack), timeout=LONG_LOCK_S + 20
            )
        result, path = await finish(stack, run, locked_at, BUSY_TIMEOUT_S, retry_safe=True)
        stack.kill(worker)
        assert result.final_text == FINAL
        output = tool_results(path)["grep"]
        assert not output.is_error and "src/data.txt:301: a needle" in text_of(output.content)
        assert len(model_requests(stack, session.id)) == 2
        attempts = await activity_attempts(stack, session.id)
        # The turn's activity (its model call and the grep) ran once: nothing run again.
        assert attempts["turn-1-1"] == 1, attempts


async def test_a_long_lock_during_finish_run_is_retried_through(stack_factory: Any) -> None:
    """7 s, while the run is in finish_run (held there by a refused first attempt): the
    local activity fails with "database is locked" after 5 s, retries, and ends the run
    once the lock is gone."""
    script = tool_then_final("ls", {})
    async with stack_factory(script) as stack:
        database = database_file(stack)
        refuse_run_end(database)
        session = await stack.client.sessions.create()
        worker = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "look")
        await finish_refused(stack, session.id)
        locked_at = time.monotonic()
        async with database_locked(database) as connection:
            allow_run_end(connection)
            await asyncio.sleep(LONG_LOCK_S)
        result, _ = await finish(stack, run, locked_at, LONG_LOCK_S)
        stack.kill(worker)
        assert result.final_text == FINAL
        assert len(model_requests(stack, session.id)) == 2
        assert len(events_of(stack, session.id, "agent_end", run_id=run.run_id)) == 1
        assert "database is locked" in worker_log(stack)  # it failed, and was retried


async def test_a_long_lock_keeps_a_finished_bash_result(stack_factory: Any) -> None:
    script = tool_then_final("bash", {"command": "sleep 1; echo slept"})
    async with stack_factory(script) as stack:
        session = await stack.client.sessions.create()
        worker = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "store something")
        await wait_for_event(stack, session.id, "tool_execution_start", tool_name="bash")
        locked_at = time.monotonic()
        await hold_lock(database_file(stack), LONG_LOCK_S)
        _, path = await finish(stack, run, locked_at, LONG_LOCK_S)
        stack.kill(worker)
        assert len(model_requests(stack, session.id)) == 2
        output = tool_results(path)["bash"]
        expect(
            not output.is_error and "slept" in text_of(output.content),
            f"the finished call's result was replaced: {text_of(output.content)!r}",
        )


async def test_a_long_lock_after_a_model_reply_does_not_ask_the_model_again(
    stack_factory: Any,
) -> None:
    script = tool_then_final("ls", {}, chunk_delay_ms=100)
    async with stack_factory(script) as stack:
        session = await stack.client.sessions.create()
        worker = stack.spawn_worker()
        run = await stack.client.runs.prompt(session.id, "look")
        # The final reply is streaming (turn 1's reply was a tool call, no text).
        await wait_for_event(stack, session.id, "message_update", kind="text")
        locked_at = time.monotonic()
        await hold_lock(database_file(stack), LONG_LOCK_S)
        result = await asyncio.wait_for(run.result(), timeout=40)
        stack.kill(worker)
        requests = model_requests(stack, session.id)
        expect(
            len(requests) == 2 and result.final_text == FINAL,
            f"{len(requests)} model requests for 2 turns; the run answered {result.final_text!r}",
        )
        await finish(stack, run, locked_at, LONG_LOCK_S)
