"""`ask_user`: the model asks the user a question, the run waits in the workflow (phase
`awaiting_input`), and the answer (from the CLI, the API, the page, after a worker
restart) becomes the call's result; the model's next request is checked at the wire."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import wire
from approval_support import result_text, stored_result, tool_results_sent
from support import (
    BOTH_PROTOCOLS,
    REPO,
    ApiServer,
    Stack,
    assert_valid_pairing,
    event_seen,
    eventually,
    user_texts,
)

from duragent.client.api import DuragentClient
from duragent.client.errors import AnswerRefused
from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.fallbacks import ABORTED_TOOL_TEXT, STOPPED_TEXT
from duragent.domain.messages import text_of
from duragent.domain.questions import ASK_USER_TOOL
from duragent.offline_model.script import load_script
from duragent.store import events as stored_events

SCRIPT = load_script(REPO / "offline_model" / "scripts" / "ask_user.yaml")
"""The bundled script: `call_ask` asks which database, with two choices."""
TOOLS = ["ls", ASK_USER_TOOL]


def asking(**question: Any) -> dict[str, Any]:
    call = {"tool_use": {"id": "call_ask", "name": ASK_USER_TOOL, "input": question}}
    return {"conversations": {"*": [{"reply": [call]}, {"reply": [{"text": "Noted."}]}]}}


def events_of(stack: Stack, session_id: str, kind: str) -> list[dict[str, Any]]:
    with stack.db.transaction() as db:
        found = stored_events.read_events(db, session_id, after=0, limit=10_000)
    return [e.payload for e in found if e.type == kind]


async def asked(stack: Stack, session_id: str, prompt: str = "start") -> Any:
    """A run of a session with `ask_user` active, once its question waits."""
    await stack.client.config.set_active_tools(session_id, TOOLS)
    run = await stack.client.runs.prompt(session_id, prompt)
    await eventually(lambda: event_seen(stack, session_id, "question_asked"))
    return run


def answer_sent(stack: Stack, session_id: str) -> dict[str, Any]:
    [sent] = tool_results_sent(stack, session_id)
    assert sent["tool_use_id"] == "call_ask"
    return sent


@pytest.mark.script(SCRIPT)
@BOTH_PROTOCOLS
async def test_answered_from_the_command_line(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await asked(stack, session.id)
        assert (await stack.client.sessions.status(session.id)).phase == "awaiting_input"
        offered = wire.offered_tools(stack.model.requests_for(session.id)[0].body)
        assert ASK_USER_TOOL in offered
        code, out, err = await stack.cli("questions", session.id)
        assert code == 0, err
        assert "call_ask  Which database should the new service use?  (turn 1)" in out
        assert "  1. SQLite" in out and "  2. PostgreSQL" in out
        assert f'answer: duragent answer {session.id} call_ask "TEXT"' in out
        code, _, err = await stack.cli("answer", session.id, "nope", "x")
        assert code == 2 and "no question 'nope' waits" in err
        code, out, err = await stack.cli("answer", session.id, "call_ask", "PostgreSQL, v16")
        assert code == 0 and out.strip() == "answered: call_ask", err
        code, _, err = await stack.cli("answer", session.id, "call_ask", "SQLite")
        # Refused for what it is, whether the run is still open or already over.
        assert code == 2 and "question 'call_ask' was already answered" in err, err
        result = await asyncio.wait_for(run.result(), timeout=60)
        code, _, err = await stack.cli("answer", session.id, "call_ask", "SQLite")
        assert code == 2 and "question 'call_ask' was already answered" in err, err
        code, _, err = await stack.cli("answer", session.id, "call_other", "SQLite")
        assert code == 2 and "has no run in progress" in err, err
    assert result.status == "completed", result.error
    assert result.final_text == "Thanks: I will go with your answer."
    sent = answer_sent(stack, session.id)
    assert result_text(sent) == "PostgreSQL, v16" and not sent.get("is_error")
    [question] = events_of(stack, session.id, "question_asked")
    assert question["question"] == "Which database should the new service use?"
    assert question["choices"] == ["SQLite", "PostgreSQL"]
    [answered] = events_of(stack, session.id, "question_answered")
    assert answered["status"] == "answered" and answered["answer"] == "PostgreSQL, v16"
    phases = [e["phase"] for e in events_of(stack, session.id, "phase_changed")]
    assert phases[:2] == ["awaiting_input", "turn"]
    assert [e["tool_call_id"] for e in events_of(stack, session.id, "tool_execution_end")] == [
        "call_ask"
    ]
    assert_valid_pairing(await stack.client.tree.path(session.id))


@pytest.mark.script(asking(question="Deploy now?", choices=["yes", "no"], allow_other=False))
async def test_answered_over_the_api_by_its_owner_only(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        created = await alice.post("/api/sessions", json={})
        session_id = created.json()["session"]["id"]
        await stack.client.config.set_active_tools(session_id, TOOLS)
        sent = await alice.post(f"/api/sessions/{session_id}/input", json={"text": "go"})
        assert sent.status_code in (200, 201, 202), sent.text
        await eventually(lambda: event_seen(stack, session_id, "question_asked"))
        listed = await alice.get(f"/api/sessions/{session_id}/questions")
        assert listed.status_code == 200, listed.text
        [pending] = listed.json()
        assert pending["call_id"] == "call_ask" and pending["question"] == "Deploy now?"
        assert pending["choices"] == ["yes", "no"] and pending["allow_other"] is False
        path = f"/api/sessions/{session_id}/questions/call_ask/answer"
        assert (await bob.get(f"/api/sessions/{session_id}/questions")).status_code == 404
        assert (await bob.post(path, json={"answer": "yes"})).status_code == 404
        blank = await alice.post(path, json={"answer": ""})
        assert blank.status_code == 422
        too_long = await alice.post(path, json={"answer": "y" * 20_000})
        assert too_long.status_code == 422
        other = await alice.post(path, json={"answer": "maybe"})
        assert other.status_code == 409
        assert "must be one of the choices: 'yes', 'no'" in other.json()["detail"]
        done = await alice.post(path, json={"answer": "no"})
        assert done.status_code == 200, done.text
        assert done.json() == {"call_id": "call_ask", "answer": "no"}
        again = await alice.post(path, json={"answer": "yes"})
        assert again.status_code == 409
        await eventually(lambda: event_seen(stack, session_id, "agent_end"))
    assert result_text(answer_sent(stack, session_id)) == "no"
    [answered] = events_of(stack, session_id, "question_answered")
    assert answered["by"] == "alice"


@pytest.mark.script(SCRIPT)
async def test_the_question_waits_across_a_worker_restart(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    first = stack.spawn_worker()
    run = await asked(stack, session.id)
    stack.kill(first)
    stack.spawn_worker()

    async def still_waiting() -> bool:
        if not await stack.client.sessions.worker_answering(session.id):
            return False
        return [q.call_id for q in await stack.client.questions.pending(session.id)] == ["call_ask"]

    await eventually(still_waiting, timeout=60)
    await stack.client.questions.answer(session.id, "call_ask", "SQLite")
    with pytest.raises(AnswerRefused, match="already answered"):
        await stack.client.questions.answer(session.id, "call_ask", "PostgreSQL")
    result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert result_text(answer_sent(stack, session.id)) == "SQLite"
    assert len(events_of(stack, session.id, "question_asked")) == 1


@pytest.mark.script(SCRIPT)
async def test_not_offered_unless_active(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "start")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    offered = [tool["name"] for tool in stack.model.requests_for(session.id)[0].body["tools"]]
    assert ASK_USER_TOOL not in offered and "delegate" in offered
    sent = answer_sent(stack, session.id)
    assert sent["is_error"] is True and "is not active in this session" in result_text(sent)
    assert events_of(stack, session.id, "question_asked") == []


@pytest.mark.script(asking(question="  "))
async def test_a_bad_question_is_an_error_the_model_reads(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await asked_no_wait(stack, session.id)
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    sent = answer_sent(stack, session.id)
    assert sent["is_error"] is True
    assert "Invalid arguments for tool 'ask_user'" in result_text(sent)
    assert "the question must not be blank" in result_text(sent)


async def asked_no_wait(stack: Stack, session_id: str) -> Any:
    await stack.client.config.set_active_tools(session_id, TOOLS)
    return await stack.client.runs.prompt(session_id, "start")


@pytest.mark.script(SCRIPT)
async def test_abort_withdraws_the_question(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await asked(stack, session.id)
        result = await stack.client.runs.abort(session.id)
        assert result.status == "aborted"
        assert await stack.client.questions.pending(session.id) == []
        with pytest.raises(AnswerRefused, match="'call_ask' no longer waits"):
            await stack.client.questions.answer(session.id, "call_ask", "SQLite")
    aborted = stored_result(stack, session.id, "call_ask")
    assert aborted.is_error and text_of(aborted.content) == ABORTED_TOOL_TEXT
    [ended] = events_of(stack, session.id, "question_answered")
    assert ended["status"] == "withdrawn"
    assert_valid_pairing(await stack.client.tree.path(session.id))


@pytest.mark.script(SCRIPT)
async def test_interrupting_guidance_withdraws_it_and_steering_waits(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await asked(stack, session.id)
        await stack.client.inputs.steer(session.id, "Use the cheaper one.")

        async def steer_queued() -> bool:
            status = await stack.client.sessions.status(session.id)
            return status.run is not None and bool(status.run.steering)

        await eventually(steer_queued)  # queued: the question still waits, as before
        status = await stack.client.sessions.status(session.id)
        assert status.phase == "awaiting_input"
        assert [q.call_id for q in await stack.client.questions.pending(session.id)] == ["call_ask"]
        await stack.client.inputs.guide_text(
            session.id, "Never mind, pick yourself.", intent="interrupt"
        )
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    stopped = stored_result(stack, session.id, "call_ask")
    assert stopped.is_error and text_of(stopped.content) == STOPPED_TEXT
    last = user_texts(stack.model.requests_for(session.id)[-1].body)
    assert any("Use the cheaper one." in text for text in last)
    assert any("Never mind, pick yourself." in text for text in last)
    [ended] = events_of(stack, session.id, "question_answered")
    assert ended["status"] == "withdrawn"
    assert_valid_pairing(await stack.client.tree.path(session.id))


@pytest.mark.script(SCRIPT)
async def test_a_timeout_answers_that_no_answer_came(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    settings = stack.settings.model_copy(update={"ask_user_timeout_s": 1.0})
    timed = DuragentClient(stack.temporal, stack.db, settings)
    async with stack.worker():
        await timed.config.set_active_tools(session.id, TOOLS)
        run = await timed.runs.prompt(session.id, "start")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    sent = answer_sent(stack, session.id)
    assert sent["is_error"] is True
    assert "the user did not answer within 1 s" in result_text(sent)
    [question] = events_of(stack, session.id, "question_asked")
    assert question["timeout_s"] == 1.0
    assert [e["status"] for e in events_of(stack, session.id, "question_answered")] == ["timeout"]


@pytest.mark.script(SCRIPT)
async def test_an_approval_policy_that_asks_does_not_hold_a_question(stack: Stack) -> None:
    """Decided: a question is itself a wait for the person, so a policy's `ask` does not
    make it wait for approval first (a `deny` rule still refuses it)."""
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.approvals.set_policy(session.id, ApprovalPolicy(default="ask"))
        run = await asked(stack, session.id)
        assert await stack.client.approvals.pending(session.id) == []
        await stack.client.questions.answer(session.id, "call_ask", "SQLite")
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed", result.error
    assert result_text(answer_sent(stack, session.id)) == "SQLite"
    assert events_of(stack, session.id, "approval_requested") == []
