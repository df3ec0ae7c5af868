"""The soak's accounting (bench/soak_sessions.py, bench/soak_checks.py) against real runs on
the dev server: it follows every run that input it sent starts, a schedule's firing that
reaches the session only after the run it was asked for in has ended included, and
expects no other run: one that no input started, or one for input that another run took,
is reported as doubled.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest
from support import Stack, eventually

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak_checks import Verdict, check_runs
from soak_sessions import SCHEDULED, Driving, RunLog, SessionLog, settle

from duragent.client.run_control import RunHandle

SCRIPT = {
    "conversations": {
        "*": [
            # The soak's own run works until the test lets it go.
            {"match": "^Work", "wait_for": "go", "reply": [{"text": "Worked."}]},
            {"match": ".", "repeat": True, "reply": [{"text": "Noted."}]},
        ]
    }
}


def driving(stack: Stack) -> Driving:
    now = time.monotonic()
    return Driving(stack, seed=0, end=now, give_up=now + 120)


@pytest.mark.script(SCRIPT)
async def test_a_firing_delivered_after_the_soak_settles_starts_a_run_the_soak_follows(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create(name="late firing")
    schedule = await stack.client.schedules.add(session.id, SCHEDULED, every="24h", paused=True)
    log = SessionLog(0, session, schedule_id=schedule.id)
    # Fired while no worker is up: its delivery waits, as one asked for near the end of a
    # run reaches the session after that run has ended and the soak began to settle.
    await stack.client.schedules.trigger(schedule.id)
    log.firings += 1
    settling = asyncio.create_task(settle(driving(stack), log))
    async with stack.worker():
        await settling

    # The idle session's firing started a run of its own, and the soak followed it.
    records = await stack.client.runs.list(session.id)
    assert [r.kind for r in records] == ["prompt"]
    assert [(r.prompt, r.run_id) for r in log.runs] == [("", records[0].run_id)]
    result = log.runs[0].result
    assert result is not None and result.status == "completed"
    verdict = Verdict()
    check_runs(stack, log, verdict)
    assert (verdict.lost, verdict.doubled, verdict.failed, verdict.runs) == ([], [], [], 1)


@pytest.mark.script(SCRIPT)
async def test_the_soak_expects_the_runs_its_input_started_and_reports_any_other(
    stack: Stack,
) -> None:
    session = await stack.client.sessions.create(name="accounting")
    sid = session.id
    log = SessionLog(0, session)
    inputs = stack.client.inputs
    async with stack.worker():
        # The soak's own run; a chat-box send while it works waits and starts the next run.
        own = RunLog(prompt="Work on part 1.")
        log.runs.append(own)
        handle = await stack.client.runs.prompt(sid, own.prompt)
        own.run_id = handle.run_id
        await eventually(lambda: len(stack.model.requests_for(sid)) == 1)
        waited = "Chat 1: also see to part 1."
        queued = await inputs.start_or_queue(sid, waited, item_id=uuid.uuid4().hex)
        assert not isinstance(queued, RunHandle)
        log.accepted[waited] = "chat"
        stack.model.release("go")
        own.result = await handle.result()
        await settle(driving(stack), log)

        # A chat-box send to the idle session starts a run itself.
        text = "Chat 2: also see to part 2."
        started = await inputs.start_or_queue(sid, text, item_id=uuid.uuid4().hex)
        assert isinstance(started, RunHandle)
        log.accepted[text] = "chat"
        log.accepted_runs[text] = started.run_id
        await started.result()
        # Runs the soak's input did not start, as a defect would: the same input run a
        # second time, and a run nobody sent anything for.
        again = await stack.client.runs.prompt(sid, text)
        await again.result()
        stray = await stack.client.runs.prompt(sid, "Nobody sent this.")
        await stray.result()
        await settle(driving(stack), log)

    records = await stack.client.runs.list(sid)
    assert sorted(r.kind for r in records) == ["prompt", "prompt", "prompt", "prompt", "queued"]
    assert {run.run_id for run in log.runs} == {r.run_id for r in records}
    verdict = Verdict()
    check_runs(stack, log, verdict)
    assert verdict.doubled == [
        f"{sid}: run {again.run_id} (prompt) for chat input {text[:24]!r}, which run "
        f"{started.run_id} took",
        f"{sid}: run {stray.run_id} (prompt) that no input the soak sent started",
    ]
    assert (verdict.lost, verdict.failed, verdict.runs) == ([], [], 5)
