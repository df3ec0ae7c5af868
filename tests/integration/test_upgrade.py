"""Upgrading workers with runs in flight, as docs/DEPLOYING.md says to: the old build's
worker is SIGKILLed in the middle of a run, a worker of the next build (one change behind
`workflow.patched`, tests/upgrade/) takes the run over by replaying the old build's
history, the run continues as new and finishes. The old execution never sees the change;
every execution after it does; no workflow task fails on the way."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from processes import REPO, spawn_python
from support import Stack, assert_valid_pairing, eventually, transcript_roles
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from upgrade.next_session_run import MEMO, PATCH

from duragent.domain.runs import session_workflow_id
from duragent.store import events

TOOL_TURNS = 5
SLOW = "Listing the files again, slowly enough for the old worker to die mid-way. " * 6


def script() -> dict[str, object]:
    ls = {"tool_use": {"name": "ls", "input": {}}}
    steps: list[dict[str, object]] = [
        {"reply": [ls]},
        # Turn 2 streams for seconds: the old build's worker is killed during it.
        {"chunk_delay_ms": 100, "reply": [{"text": SLOW}, ls]},
        {"reply": [{"text": "Again."}, ls]},  # turn 2's retry, on the next build
    ]
    steps += [{"reply": [ls]} for _ in range(TOOL_TURNS - 2)]
    steps.append({"reply": [{"text": "Done."}]})
    return {"conversations": {"*": steps}}


def spawn_next_build(stack: Stack) -> subprocess.Popen[bytes]:
    env = stack.env() | {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}"}
    log = open(stack.settings.home / "worker-next.log", "wb")  # noqa: SIM115
    args = ["-c", "from upgrade import next_worker; next_worker.main()"]
    process = spawn_python(args, env, log)
    stack.processes.append(process)
    return process


def identities(history: list[HistoryEvent]) -> set[str]:
    """The workers that completed the execution's workflow tasks."""
    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    return {
        e.workflow_task_completed_event_attributes.identity
        for e in history
        if e.event_type == completed
    }


def patch_markers(history: list[HistoryEvent]) -> int:
    marker = EventType.EVENT_TYPE_MARKER_RECORDED
    return sum(
        1
        for e in history
        if e.event_type == marker
        and PATCH.encode() in e.marker_recorded_event_attributes.SerializeToString()
    )


@pytest.mark.script(script())
async def test_a_run_in_flight_survives_an_upgrade_across_a_continue_as_new(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create()
    options = stack.client.runs.default_options().model_copy(
        update={"continue_as_new_after_turns": 2}
    )
    old = stack.spawn_worker()
    run = await stack.client.runs.prompt(session.id, "list the files, many times", options=options)

    def turn_two_streams() -> bool:  # turn 1's reply has no text
        with stack.db.transaction() as db:
            stored = events.read_events(db, session.id)
        return any(e.type == "message_update" and e.payload.get("kind") == "text" for e in stored)

    await eventually(turn_two_streams)
    stack.kill(old)
    assert old.returncode is not None

    new = spawn_next_build(stack)
    result = await asyncio.wait_for(run.result(), timeout=90)
    stack.kill(new)
    assert result.status == "completed", result.error
    assert result.final_text == "Done." and result.turns == TOOL_TURNS + 1

    executions = []
    async for listed in stack.temporal.list_workflows(
        f"WorkflowId = '{session_workflow_id(session.id)}'"
    ):
        handle = stack.temporal.get_workflow_handle(listed.id, run_id=listed.run_id)
        description = await handle.describe()
        history = list((await handle.fetch_history()).events)
        executions.append((description.start_time, await description.memo(), history))
    executions.sort(key=lambda e: e[0])
    assert len(executions) >= 2  # it did continue as new

    (_, first_memo, first), *later = executions
    continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert first[-1].event_type == continued
    # Begun by the old build, finished by the next one, which replayed it without a fault
    # and left the old behaviour as it was.
    assert len(identities(first)) == 2
    assert patch_markers(first) == 0 and "build" not in first_memo
    for _, memo, history in later:
        assert patch_markers(history) == 1 and memo["build"] == MEMO["build"]
    for _, _, history in executions:
        failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        assert not [e for e in history if e.event_type == failed]

    path = await stack.client.tree.path(session.id)
    assert_valid_pairing(path)
    assert transcript_roles(path) == ["user"] + ["assistant", "toolResult"] * TOOL_TURNS + [
        "assistant"
    ]
