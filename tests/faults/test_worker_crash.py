"""Workers SIGKILLed at the worst moments: mid-stream, mid-finish, with signals pending,
with a retry-safe and a non-retry-safe tool running. A new worker always finishes the run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from checks import (
    SAVE_POINT_REFUSED,
    allow,
    allow_run_end,
    assert_session_sound,
    database_file,
    database_locked,
    events_of,
    expect,
    finish_refused,
    history_types,
    model_requests,
    refuse,
    refuse_run_end,
    refused,
    tool_results,
    user_texts,
    wait_for_event,
)
from support import Stack, eventually, transcript_roles
from temporalio.api.enums.v1 import EventType

from duragent.domain.messages import text_of

WORKFLOW_TASK_TIMED_OUT = EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT


def workspace_of(stack: Stack, session_id: str) -> Path:
    return Path(stack.client.sync.sessions.get(session_id).workspace)


SLOW_TEXT = "A long answer, streamed slowly so the worker dies half-way through it. " * 8


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                # Streams for ~6 s; the worker is killed once the first deltas are stored.
                {"chunk_delay_ms": 100, "reply": [{"text": SLOW_TEXT}]},
                # The retry, on the new worker.
                {"reply": [{"text": "Listing."}, {"tool_use": {"name": "ls", "input": {}}}]},
                {"reply": [{"text": "Done."}]},
            ]
        }
    }
)
async def test_worker_killed_during_a_model_stream(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "talk")
    await wait_for_event(stack, session.id, "message_update", attempt=1)
    stack.kill(first)
    assert first.returncode is not None
    partial = "".join(p["delta"] for p in events_of(stack, session.id, "message_update"))
    assert 0 < len(partial) < len(SLOW_TEXT)  # the stream really was cut part-way

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == "Done."
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    assert SLOW_TEXT not in str([e.model_dump() for e in path])  # the cut reply left no entry
    # The retry streamed as attempt 2 and asked the model exactly what the first did.
    assert events_of(stack, session.id, "message_update", attempt=2)
    first_call, retry, last = (r.body for r in model_requests(stack, session.id))
    assert retry["messages"] == first_call["messages"]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant", "user"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},  # no text
                # Turn 2 streams for ~6 s; the worker is killed during it.
                {"chunk_delay_ms": 100, "reply": [{"text": SLOW_TEXT}]},
                {"reply": [{"text": "Done."}]},
            ]
        }
    }
)
async def test_worker_killed_during_a_later_turns_model_stream(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "talk")
    await wait_for_event(stack, session.id, "message_update", kind="text", attempt=1)
    stack.kill(first)  # turn 2's reply is streaming (turn 1's had no text)
    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == "Done."
    _, first_call, retry = (r.body for r in model_requests(stack, session.id))
    expect(
        retry["messages"] == first_call["messages"],
        f"the retry sent {[m['role'] for m in retry['messages']]}, "
        f"the first attempt {[m['role'] for m in first_call['messages']]}",
    )
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]


FINAL = "All done."
TOOL_THEN_FINAL = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo hi >> out.txt"}}}]},
            {"reply": [{"text": FINAL}]},
        ]
    }
}


@pytest.mark.script(TOOL_THEN_FINAL)
async def test_worker_killed_inside_finish_run(stack: Stack) -> None:
    """The run's last store write (finish_run) is refused until the test has the database
    locked: the worker dies while finish_run waits for the lock inside its transaction.
    The lock goes with the worker; a new worker finishes the run exactly once."""
    database = database_file(stack)
    refuse_run_end(database)
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "say hi")
    await finish_refused(stack, session.id)
    async with database_locked(database) as connection:
        allow_run_end(connection)  # committed with the lock's release, after the kill
        await asyncio.sleep(2.0)  # finish_run's next attempt is waiting for the lock
        stack.kill(first)

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == FINAL
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    record = await stack.client.runs.get(run.run_id)
    assert record is not None and record.status == "completed" and record.turns == 2
    assert len(events_of(stack, session.id, "agent_end", run_id=run.run_id)) == 1
    # The crash cost the workflow task, not the model call: it was not made again.
    assert len(model_requests(stack, session.id)) == 2
    assert WORKFLOW_TASK_TIMED_OUT in await history_types(stack, session.id)
    assert (workspace_of(stack, session.id) / "out.txt").read_text() == "hi\n"


@pytest.mark.script(TOOL_THEN_FINAL)
async def test_worker_killed_inside_a_save_point(stack: Stack) -> None:
    """The save point of the first turn (committed by the second model_turn before its
    model call) is refused until the database is locked; the worker dies waiting for the
    lock inside that commit. A new worker commits the turn once and asks the model once."""
    database = database_file(stack)
    refuse(database, SAVE_POINT_REFUSED)
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "say hi")
    await refused(stack, SAVE_POINT_REFUSED)
    assert len(model_requests(stack, session.id)) == 1
    async with database_locked(database) as connection:
        allow(connection, SAVE_POINT_REFUSED)
        await asyncio.sleep(2.0)  # the commit's next attempt is waiting for the lock
        stack.kill(first)

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == FINAL
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    assert len(events_of(stack, session.id, "save_point")) == 2
    assert len(model_requests(stack, session.id)) == 2
    assert (workspace_of(stack, session.id) / "out.txt").read_text() == "hi\n"


def bash_then(*answers: str) -> dict[str, object]:
    """A script: a 3-second bash call that appends to runs.txt, then these text answers."""
    bash = {"name": "bash", "input": {"command": "echo go >> runs.txt; sleep 3"}}
    replies = [{"reply": [{"tool_use": bash}]}, *({"reply": [{"text": a}]} for a in answers)]
    return {"conversations": {"*": replies}}


STEER = "Also update the docs."
FOLLOW_UP = "Then add a changelog entry."


@pytest.mark.script(bash_then("Docs noted.", "Changelog noted."))
async def test_steer_and_follow_up_sent_while_no_worker_runs(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    runs = workspace_of(stack, session.id) / "runs.txt"
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "work")
    await eventually(lambda: runs.exists(), timeout=30)
    stack.kill(first)

    # No worker is polling: the signals wait in the run's history. A resend (same id,
    # as a client retrying after a timeout would) must not deliver the steer twice.
    steer_id = await stack.client.inputs.steer(session.id, STEER)
    await stack.client.inputs.follow_up(session.id, FOLLOW_UP)
    await stack.client.inputs.steer(session.id, STEER, item_id=steer_id)

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    assert result.final_text == "Changelog noted."
    path = assert_session_sound(stack, session.id, queued=[STEER, FOLLOW_UP])
    assert transcript_roles(path) == [
        "user",
        "assistant",
        "toolResult",
        "user",  # the steer, after the interrupted call's result
        "assistant",
        "user",  # the follow-up, when the agent would have stopped
        "assistant",
    ]
    assert path[3].id == steer_id
    interrupted = tool_results(path)["bash"]
    assert interrupted.is_error and "interrupted by a worker failure" in text_of(
        interrupted.content
    )
    # The steer reached the second model call, the follow-up only the third.
    _, steered, followed = (user_texts(r.body) for r in model_requests(stack, session.id))
    assert steered[-1] == STEER and FOLLOW_UP not in steered
    assert followed[-1] == FOLLOW_UP
    assert runs.read_text() == "go\n"


GUIDANCE = "Stop there and summarise what you have."


@pytest.mark.script(bash_then("Summary: it was interrupted."))
async def test_guidance_sent_while_no_worker_runs(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    runs = workspace_of(stack, session.id) / "runs.txt"
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "work")
    await eventually(lambda: runs.exists(), timeout=30)
    stack.kill(first)

    # The run is open but nothing answers it: guidance still goes in (twice, as a client
    # retrying would), and waits for the next worker.
    item = await stack.client.inputs.next_turn(session.id, GUIDANCE)
    await stack.client.inputs.guide(session.id, item.id)
    await stack.client.inputs.guide(session.id, item.id)

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    path = assert_session_sound(stack, session.id)
    assert [e.id for e in path].count(item.id) == 1
    assert (await stack.client.inputs.item(session.id, item.id)).status == "consumed"
    injected = events_of(stack, session.id, "runtime_guidance_injected")
    assert [e["item_ids"] for e in injected] == [[item.id]]
    _, guided = (user_texts(r.body) for r in model_requests(stack, session.id))
    assert sum(GUIDANCE in text for text in guided) == 1
    assert runs.read_text() == "go\n"  # bash was not run again


SLOW_BASH = "echo started >> log.txt; sleep 20; echo finished >> log.txt"
# Python's backtracking makes this search cost a few ms per 200-character line, so a
# 3000-line tree takes seconds: long enough to be caught running, with no special files.
SLOW_PATTERN = r"\w*\w*needle"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"tool_use": {"name": "bash", "input": {"command": SLOW_BASH}}},
                        {
                            "tool_use": {
                                "name": "grep",
                                "input": {"pattern": SLOW_PATTERN, "path": "tree"},
                            }
                        },
                    ]
                },
                {"reply": [{"text": "The search found it; the command was interrupted."}]},
            ]
        }
    }
)
async def test_a_retry_safe_tool_is_retried_after_a_crash_and_bash_is_not(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    workspace = workspace_of(stack, session.id)
    tree = workspace / "tree"
    for i in range(30):
        folder = tree / f"pkg{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module{i}.txt").write_text(("a" * 200 + "\n") * 100)
    first = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "search and run")
    await wait_for_event(stack, session.id, "tool_execution_start", tool_name="grep", attempt=1)
    await wait_for_event(stack, session.id, "tool_execution_start", tool_name="bash", attempt=1)
    stack.kill(first)
    assert not events_of(stack, session.id, "tool_execution_end")  # both were running

    # What the retried search will find: only a run after the crash can see this file.
    for file in tree.rglob("*.txt"):
        file.unlink()
    (tree / "found.txt").write_text("the needle\n")

    second = stack.spawn_worker()
    result = await asyncio.wait_for(run.result(), timeout=40)
    stack.kill(second)

    assert result.status == "completed", result.error
    path = assert_session_sound(stack, session.id)
    assert transcript_roles(path) == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    results = tool_results(path)
    searched = text_of(results["grep"].content)
    assert not results["grep"].is_error, searched
    assert "tree/found.txt:1: the needle" in searched
    assert "interrupted" not in searched
    assert (results["grep"].details or {}).get("interrupted") is None
    ran = text_of(results["bash"].content)
    assert results["bash"].is_error and "interrupted by a worker failure" in ran
    assert "not run again" in ran and "was stopped" in ran
    assert (results["bash"].details or {}).get("interrupted") is True
    # grep ran twice (the second time to the end); bash once; one result each.
    starts = events_of(stack, session.id, "tool_execution_start")
    assert sorted((s["tool_name"], s["attempt"]) for s in starts) == [
        ("bash", 1),
        ("grep", 1),
        ("grep", 2),
    ]
    ends = events_of(stack, session.id, "tool_execution_end")
    assert sorted(e["tool_name"] for e in ends) == ["bash", "grep"]
    assert (workspace / "log.txt").read_text() == "started\n"


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "never played"}]}]}})
async def test_status_while_no_worker_runs_says_busy(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    run = await stack.client.runs.prompt(session.id, "nobody is polling")
    try:
        try:
            status = await asyncio.wait_for(stack.client.sessions.status(session.id), timeout=5)
        except TimeoutError:
            raise AssertionError("status() did not answer within 5 s") from None
        expect(status.phase != "idle", "an open run is reported as idle")
    finally:
        await run.workflow.terminate("test over")
