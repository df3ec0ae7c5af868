"""Accepted input always runs: input a session is sent while a run is open, by any channel
(the page's and the API's `send`, a webhook, AG-UI, the command line, a schedule), waits in
the queue and starts the next run when the open one ends, that run taking all of it in the
order it came; steering and follow-ups the run never reached do the same. Nothing
accepted is left waiting for a run that never comes, and nothing runs twice."""

from __future__ import annotations

from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call
from integration.test_triggers import TEMPLATE, add_trigger, deliver, encoded, github
from support import IN_PROCESS_MODEL, ApiServer, Stack, eventually, run_finished, user_texts

from duragent.domain.messages import user_text
from duragent.store import input_queue, runs
from duragent.store.clock import now_ms

pytestmark = IN_PROCESS_MODEL  # none of it is about the model's wire

GATED = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "first answer"}]},
            {"reply": [{"text": "second answer"}]},
            {"reply": [{"text": "third answer"}]},
        ]
    }
}


async def new_session(http: Any) -> str:
    created = await http.post("/api/sessions", json={"name": "queued"})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


async def busy(stack: Stack, http: Any, session: str) -> str:
    """Start a run that waits on the model (until `go`); its id."""
    sent = await http.post(f"/api/sessions/{session}/input", json={"text": "the task"})
    assert sent.json()["action"] == "started", sent.text
    await eventually(lambda: len(stack.model.requests_for(session)) == 1)
    return str(sent.json()["run_id"])


def all_ended(stack: Stack, session: str, count: int) -> bool:
    found = stack.client.sync.runs.list(session)
    return len(found) == count and all(r.status != "running" for r in found)


@pytest.mark.script(GATED)
async def test_input_sent_while_busy_starts_the_next_run_with_all_of_it_in_order(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        first = await busy(stack, http, session)
        for text in ("also this", "and that"):
            queued = await http.post(f"/api/sessions/{session}/input", json={"text": text})
            assert queued.status_code == 200, queued.text
            answer = queued.json()
            assert answer["action"] == "queued"
            assert answer["item"]["starts_run"] is True
        # Still a chip its sender may edit, guide or delete while the run goes on.
        pending = (await http.get(f"/api/sessions/{session}/input-queue")).json()
        assert [i["text"] for i in pending] == ["also this", "and that"]
        stack.model.release("go")
        await eventually(lambda: all_ended(stack, session, 2), timeout=30)
    second, earlier = await stack.client.runs.list(session)
    assert earlier.run_id == first and earlier.status == "completed"
    assert (second.kind, second.status) == ("queued", "completed")
    requests = stack.model.requests_for(session)
    assert len(requests) == 2  # one more model call: both inputs in one run
    assert user_texts(requests[1].body)[-2:] == ["also this", "and that"]
    assert await stack.client.inputs.queue(session) == []
    # The run's own caller still gets the run's own result, not the next run's.
    result = await stack.client.runs.handle(session, first).result()
    assert (result.run_id, result.final_text) == (first, "first answer")


@pytest.mark.script(GATED)
async def test_a_burst_of_webhooks_to_a_busy_session_each_runs_once(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        trigger, secret = await add_trigger(http, template=TEMPLATE, session_id=session)
        await busy(stack, http, session)
        for number in (1, 2, 3):
            body = encoded(
                {
                    "action": "opened",
                    "number": number,
                    "pull_request": {"title": f"PR {number}", "html_url": "u"},
                    "repository": {"full_name": "acme/widgets"},
                }
            )
            sent = await deliver(api, trigger, body, github(secret, body, f"d-{number}"))
            assert sent.status_code == 202, sent.text
            assert sent.json()["action"] == "queued"
        stack.model.release("go")
        await eventually(lambda: all_ended(stack, session, 2), timeout=30)
    requests = stack.model.requests_for(session)
    deliveries = [t for t in user_texts(requests[-1].body) if "Webhook event" in t]
    assert [t.split("delivery ")[1][:3] for t in deliveries] == ["d-1", "d-2", "d-3"]
    everything = [t for r in requests for t in user_texts(r.body) if "Webhook event" in t]
    assert len(everything) == 3  # each in the one run after the busy one, once


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "Running it."}, bash_call("echo hi", "call_1")]},
                {"reply": [{"text": "ran it"}]},
                {"reply": [{"text": "read your note"}]},
            ]
        }
    }
)
async def test_an_agui_message_sent_while_a_call_waits_for_approval_runs_after_it(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        await stack.client.approvals.set_policy(session, ASK_BASH)
        await http.post(f"/api/sessions/{session}/input", json={"text": "run echo"})

        async def waiting() -> bool:
            return bool(await stack.client.approvals.pending(session))

        await eventually(waiting)
        body = {
            "threadId": session,
            "runId": "agui-2",
            "state": None,
            "messages": [{"id": "m-2", "role": "user", "content": "a note for later"}],
            "tools": [],
            "context": [],
            "forwardedProps": None,
        }
        async with http.stream("POST", "/api/agui", json=body) as response:
            assert response.status_code == 200
        assert [i.text for i in await stack.client.inputs.queue(session)] == ["a note for later"]
        decided = await http.post(f"/api/sessions/{session}/approvals/call_1/approve", json={})
        assert decided.status_code == 200, decided.text
        await eventually(lambda: all_ended(stack, session, 2), timeout=30)
    last = stack.model.requests_for(session)[-1]
    assert user_texts(last.body)[-1] == "a note for later"
    assert (await stack.client.runs.list(session))[0].kind == "queued"


@pytest.mark.script(GATED)
async def test_the_command_lines_send_queues_and_the_next_run_takes_it(stack: Stack) -> None:
    async with stack.worker():
        session = (await stack.client.sessions.create(name="cli")).id
        await stack.client.runs.prompt(session, "the task")
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        out = await stack.cli_ok("send", session, "from the terminal")
        assert "queued" in out and "starts the next run when the open one ends" in out
        stack.model.release("go")
        await eventually(lambda: all_ended(stack, session, 2), timeout=30)
    assert user_texts(stack.model.requests_for(session)[-1].body)[-1] == "from the terminal"


@pytest.mark.script(GATED)
async def test_a_follow_up_the_run_never_reached_starts_the_next_run(stack: Stack) -> None:
    async with stack.worker():
        session = (await stack.client.sessions.create(name="limit")).id
        await stack.client.runs.prompt(session, "the task", max_turns=1)
        await eventually(lambda: len(stack.model.requests_for(session)) == 1)
        await stack.client.inputs.steer(session, "steered too late")
        stack.model.release("go")
        await eventually(lambda: all_ended(stack, session, 2), timeout=30)
    # The turn limit ended the run before the steering reached the model.
    requests = stack.model.requests_for(session)
    assert "steered too late" not in user_texts(requests[0].body)
    assert user_texts(requests[1].body)[-1] == "steered too late"


@pytest.mark.script(GATED)
async def test_stop_cancels_what_was_queued_and_starts_nothing(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        await busy(stack, http, session)
        await http.post(f"/api/sessions/{session}/input", json={"text": "never mind"})
        result = await stack.client.runs.abort(session)
        assert result.status == "aborted" and result.cancelled_inputs == ["never mind"]
        assert run_finished(stack, session)
    assert len(await stack.client.runs.list(session)) == 1
    assert [i.status for i in await stack.client.inputs.queue(session, status=None)] == [
        "cancelled"
    ]


async def test_input_is_refused_once_the_runs_end_is_stored(stack: Stack) -> None:
    """The store's side of the hand-over: input queued for a run is taken by its end or
    refused once that end is stored (the sender then starts the next run itself)."""
    session = (await stack.client.sessions.create(name="gate")).id
    message = user_text("late", now_ms())
    with stack.client.db.transaction() as db:
        # A run not recorded yet (its start is on its way) takes pending input at its start.
        item = input_queue.queue_while_running(
            db, item_id="i1", session_id=session, run_id="r1", message=message
        )
        assert item.starts_run
        runs.insert_run(db, run_id="r1", session_id=session, workflow_id="w")
        input_queue.queue_while_running(
            db, item_id="i2", session_id=session, run_id="r1", message=message
        )
        assert input_queue.has_run_starting_input(db, session)
        runs.update_run(db, "r1", status="completed", ended=True)
    with pytest.raises(input_queue.RunClosing), stack.client.db.transaction() as db:
        input_queue.queue_while_running(
            db, item_id="i3", session_id=session, run_id="r1", message=message
        )
    assert [i.id for i in await stack.client.inputs.queue(session)] == ["i1", "i2"]
