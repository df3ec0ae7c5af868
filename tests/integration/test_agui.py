"""The AG-UI endpoint, driven with the protocol's own types (`ag_ui.core`): a run whose
tool call waits for approval ends its AG-UI run with an interrupt, a watcher joining then
sees the same interrupt, the answer's `resume` runs the call and the rest of the run, and
the stream resumes from a `Last-Event-ID`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Event,
    ResumeEntry,
    RunAgentInput,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from approval_support import ASK_BASH, bash_call
from pydantic import TypeAdapter
from support import ApiServer, Stack

from duragent.api.agui_waits import position_of

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"text": "Writing it."}, bash_call("echo ran > out.txt", "call_write")]},
            {"reply": [{"text": "All done."}]},
        ]
    }
}

Frames = list[tuple[int | None, BaseEvent]]


async def read_run(http: Any, method: str, url: str, **kwargs: Any) -> Frames:
    """One AG-UI run's events as they arrived, each with the SSE id it came with, read
    until its RUN_FINISHED (or RUN_ERROR)."""
    frames: Frames = []
    event_id: int | None = None
    async with http.stream(method, url, **kwargs) as stream:
        assert stream.status_code == 200, await stream.aread()
        assert stream.headers["content-type"].startswith("text/event-stream")
        async for line in stream.aiter_lines():
            if line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("data: "):
                event = EVENT.validate_json(line[6:])
                frames.append((event_id, event))
                event_id = None
                if event.type in ("RUN_FINISHED", "RUN_ERROR"):
                    return frames
    raise AssertionError(f"the stream ended before its run finished: {frames}")


def run_input(session_id: str, run_id: str, **fields: Any) -> dict[str, Any]:
    messages = [UserMessage(id="user-1", content="write it")]
    body = RunAgentInput(thread_id=session_id, run_id=run_id, messages=messages, **fields)
    return body.model_dump(mode="json", by_alias=True)


def of(frames: Frames, kind: type[BaseEvent]) -> list[Any]:
    return [event for _, event in frames if isinstance(event, kind)]


def state_after(frames: Frames) -> dict[str, Any]:
    """The state a client holds after these events (the deltas only replace fields)."""
    [snapshot] = of(frames, StateSnapshotEvent)
    state = dict(snapshot.snapshot)
    for delta in of(frames, StateDeltaEvent):
        for op in delta.delta:
            assert op.op == "replace"
            state[op.path.lstrip("/")] = op.value
    return state


@pytest.mark.script(SCRIPT)
async def test_the_agui_stream_of_a_run_with_a_tool_call_and_an_approval(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http, api.client(ApiServer.OTHER_TOKEN) as bob:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        assert (await bob.post("/api/agui", json=run_input(session, "r"))).status_code == 404
        assert (await http.post("/api/agui", json=run_input("nope", "r"))).status_code == 404
        not_user = run_input(session, "r")
        not_user["messages"] = [{"id": "a", "role": "assistant", "content": "hi"}]
        refused = await http.post("/api/agui", json=not_user)
        assert refused.status_code == 422 and "user message" in refused.json()["detail"]

        # The prompt: the model's text, its tool call, then the wait as an interrupt.
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "agui-1"))
        started = first[0][1]
        assert isinstance(started, RunStartedEvent)
        assert (started.thread_id, started.run_id) == (session, "agui-1")
        assert isinstance(first[1][1], StateSnapshotEvent)
        [text_start] = of(first, TextMessageStartEvent)  # the prompt is not echoed back
        assert text_start.role == "assistant"
        assert "".join(e.delta for e in of(first, TextMessageContentEvent)) == "Writing it."
        [call] = of(first, ToolCallStartEvent)
        assert (call.tool_call_id, call.tool_call_name) == ("call_write", "bash")
        assert call.parent_message_id == text_start.message_id
        args = "".join(e.delta for e in of(first, ToolCallArgsEvent))
        assert json.loads(args) == {"command": "echo ran > out.txt"}
        assert [e.tool_call_id for e in of(first, ToolCallEndEvent)] == ["call_write"]
        assert of(first, ToolCallResultEvent) == []  # nothing ran
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent) and finished.run_id == "agui-1"
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        [interrupt] = finished.outcome.interrupts
        told = max(seq for seq, _ in first if seq is not None)
        assert position_of(interrupt.id) == ("approval:call_write", told)
        assert interrupt.reason == "tool_approval"
        assert interrupt.tool_call_id == "call_write"
        assert interrupt.metadata and interrupt.metadata["arguments"] == {
            "command": "echo ran > out.txt"
        }
        state = state_after(first)
        assert state["phase"] == "awaiting_approval" and state["turn"] == 1
        run_id = state["run_id"]
        assert run_id and state["usage"]["output_tokens"] > 0

        # A watcher that joins now sees the duragent run, and the same interrupt.
        watched = await read_run(http, "GET", f"/api/sessions/{session}/agui")
        assert [type(e) for _, e in watched] == [
            RunStartedEvent,
            StateSnapshotEvent,
            RunFinishedEvent,
        ]
        [(_, joined), (_, snapshot), (_, waits)] = watched
        assert isinstance(joined, RunStartedEvent) and joined.run_id == run_id
        assert isinstance(snapshot, StateSnapshotEvent)
        assert snapshot.snapshot["phase"] == "awaiting_approval"
        assert isinstance(waits, RunFinishedEvent)
        assert isinstance(waits.outcome, RunFinishedInterruptOutcome)
        [same] = waits.outcome.interrupts
        assert same.model_dump(exclude={"id"}) == interrupt.model_dump(exclude={"id"})
        assert position_of(same.id)[0] == "approval:call_write"
        assert (await bob.get(f"/api/sessions/{session}/agui")).status_code == 404

        # The answer: the call runs, the model answers, the run ends.
        approve = ResumeEntry(
            interrupt_id=interrupt.id, status="resolved", payload={"approved": True}
        )
        body = run_input(session, "agui-2", resume=[approve.model_dump(by_alias=True)])
        second = await read_run(http, "POST", "/api/agui", json=body)
        assert isinstance(second[0][1], RunStartedEvent) and second[0][1].run_id == "agui-2"
        decided = [e for e in of(second, CustomEvent) if e.name == "duragent.approval_decided"]
        assert [e.value["decision"] for e in decided] == ["approve"]
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_write"
        assert "".join(e.delta for e in of(second, TextMessageContentEvent)) == "All done."
        last = second[-1][1]
        assert isinstance(last, RunFinishedEvent) and last.run_id == "agui-2"
        assert isinstance(last.outcome, RunFinishedSuccessOutcome)
        assert state_after(second)["phase"] == "idle"
        assert (Path(stack.client.sessions.get(session).workspace) / "out.txt").exists()

        # A dropped stream resumes after the last id it saw (here: the tool's result): the
        # same events follow, in a whole AG-UI run of their own (opened again; its state
        # deltas are against its own snapshot).
        at = next(i for i, (_, e) in enumerate(second) if isinstance(e, ToolCallResultEvent))
        cut = second[at][0]
        assert cut is not None
        resumed = await read_run(
            http, "GET", f"/api/sessions/{session}/agui", headers={"Last-Event-ID": str(cut)}
        )
        assert isinstance(resumed[0][1], RunStartedEvent) and resumed[0][1].run_id == run_id
        assert isinstance(resumed[1][1], StateSnapshotEvent)
        assert without_state(resumed[2:]) == without_state(second[at + 1 :])
        assert state_after(resumed)["phase"] == "idle"


def without_state(frames: Frames) -> list[dict[str, Any]]:
    """The events but the state's, as a client reads them (the run's own id aside)."""
    return [
        event.model_dump(exclude={"run_id"})
        for _, event in frames
        if not isinstance(event, StateDeltaEvent | StateSnapshotEvent)
    ]


@pytest.mark.script(SCRIPT)
async def test_a_resume_that_denies_and_resumes_that_are_refused(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "agui-1"))
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)

        def answer(interrupt_id: str, payload: Any) -> dict[str, Any]:
            entry = ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=payload)
            return run_input(session, "agui-2", resume=[entry.model_dump(by_alias=True)])

        unknown = await http.post("/api/agui", json=answer("survey:1", {"approved": True}))
        assert (
            unknown.status_code == 422
            and "approval:<id>, question:<id>" in unknown.json()["detail"]
        )
        bad = await http.post("/api/agui", json=answer("approval:call_write", {"ok": True}))
        assert bad.status_code == 422 and "approved" in bad.json()["detail"]
        nothing = await http.post("/api/agui", json=answer("approval:nope", {"approved": True}))
        assert nothing.status_code == 409  # no such call waits: nothing decided
        assert [p.call_id for p in await stack.client.approvals.pending(session)] == ["call_write"]

        deny = answer("approval:call_write", {"approved": False, "reason": "not on a Friday"})
        second = await read_run(http, "POST", "/api/agui", json=deny)
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_write" and "not on a Friday" in result.content
        last = second[-1][1]
        assert isinstance(last, RunFinishedEvent)
        assert isinstance(last.outcome, RunFinishedSuccessOutcome)
        assert not (Path(stack.client.sessions.get(session).workspace) / "out.txt").exists()


@pytest.mark.script(SCRIPT)
async def test_a_run_stopped_while_it_waits_finishes_cancelled(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "agui-1"))
        told = max(seq for seq, _ in first if seq is not None)
        assert (await http.post(f"/api/sessions/{session}/stop")).status_code == 200
        after = await read_run(http, "GET", f"/api/sessions/{session}/agui?after={told}")
        withdrawn = [e for e in of(after, CustomEvent) if e.name == "duragent.approval_decided"]
        assert [e.value["decision"] for e in withdrawn] == ["withdrawn"]
        last = after[-1][1]
        assert isinstance(last, RunFinishedEvent)
        assert isinstance(last.outcome, RunFinishedCancelledOutcome)
        assert state_after(after)["phase"] == "idle"


ASK_SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {
                        "tool_use": {
                            "id": "call_ask",
                            "name": "ask_user",
                            "input": {
                                "question": "Which database?",
                                "choices": ["SQLite", "PostgreSQL"],
                                "allow_other": False,
                            },
                        }
                    }
                ]
            },
            {"reply": [{"text": "Noted."}]},
        ]
    }
}


@pytest.mark.script(ASK_SCRIPT)
async def test_an_ask_user_question_is_an_interrupt_its_resume_answers(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.config.set_active_tools(session, ["ls", "ask_user"])
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "ask-1"))
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        [interrupt] = finished.outcome.interrupts
        assert position_of(interrupt.id)[0] == "question:call_ask"
        assert (interrupt.reason, interrupt.message) == ("ask_user", "Which database?")
        assert interrupt.tool_call_id == "call_ask"
        assert interrupt.response_schema
        assert interrupt.response_schema["properties"]["answer"]["enum"] == [
            "SQLite",
            "PostgreSQL",
        ]
        assert state_after(first)["phase"] == "awaiting_input"

        def answering(payload: Any, status: str = "resolved") -> dict[str, Any]:
            entry = ResumeEntry(interrupt_id=interrupt.id, status=status, payload=payload)
            return run_input(session, "ask-2", resume=[entry])

        # Not one of the choices, no answer, a cancel: refused by name, nothing answered.
        wrong = await http.post("/api/agui", json=answering({"answer": "MySQL"}))
        assert wrong.status_code == 409 and "one of the choices" in wrong.text
        assert (await http.post("/api/agui", json=answering({}))).status_code == 422
        cancelled = await http.post("/api/agui", json=answering(None, "cancelled"))
        assert cancelled.status_code == 422 and "answered, not cancelled" in cancelled.text
        assert [q.call_id for q in await stack.client.questions.pending(session)] == ["call_ask"]

        second = await read_run(http, "POST", "/api/agui", json=answering({"answer": "PostgreSQL"}))
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_ask" and "PostgreSQL" in result.content
        assert "".join(e.delta for e in of(second, TextMessageContentEvent)) == "Noted."
        done = second[-1][1]
        assert isinstance(done, RunFinishedEvent)
        assert isinstance(done.outcome, RunFinishedSuccessOutcome)
