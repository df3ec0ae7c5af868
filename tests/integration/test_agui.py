"""The AG-UI endpoint, driven with the protocol's own types (`ag_ui.core`): a run whose
tool call waits for approval ends its AG-UI run with an interrupt, a watcher joining then
sees the same interrupt, the answer's `resume` runs the call and the rest of the run, and
the stream resumes from a `Last-Event-ID`. A resume for an interrupt settled elsewhere is
a warning and the run goes on; the messages a client keeps by the protocol's rules are the
transcript's, in its order. The official client, `@ag-ui/client`'s HttpAgent in node
(`tests/agui_client/`), drives it too."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Event,
    MessagesSnapshotEvent,
    ReasoningMessageContentEvent,
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
    ToolMessage,
    UserMessage,
)
from approval_support import ASK_BASH, bash_call
from pydantic import TypeAdapter
from support import IN_PROCESS_MODEL, REPO, ApiServer, Stack, eventually, run_finished

from duragent.api.agui_waits import position_of
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import text_of

pytestmark = IN_PROCESS_MODEL  # none of it is about the model's wire

EVENT: TypeAdapter[Any] = TypeAdapter(Event)
SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {"thinking": "A file, then."},
                    {"text": "Writing it."},
                    bash_call("echo ran > out.txt", "call_write"),
                ]
            },
            {"reply": [{"text": "All done."}]},
        ]
    }
}

Frames = list[tuple[int | None, BaseEvent]]


async def read_run(
    http: Any, method: str, url: str, *, answered: asyncio.Event | None = None, **kwargs: Any
) -> Frames:
    """One AG-UI run's events as they arrived, each with the SSE id it came with, read
    until its RUN_FINISHED (or RUN_ERROR). `answered` is set once the response began (the
    input was taken)."""
    frames: Frames = []
    event_id: int | None = None
    async with http.stream(method, url, **kwargs) as stream:
        if answered is not None:
            answered.set()
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


def run_input(
    session_id: str, run_id: str, messages: list[Any] | None = None, **fields: Any
) -> dict[str, Any]:
    messages = messages or [UserMessage(id="user-1", content="write it")]
    body = RunAgentInput(thread_id=session_id, run_id=run_id, messages=messages, **fields)
    return body.model_dump(mode="json", by_alias=True)


def resume_input(
    session_id: str, run_id: str, interrupt_id: str, payload: Any, status: str = "resolved"
) -> dict[str, Any]:
    entry = ResumeEntry(interrupt_id=interrupt_id, status=status, payload=payload)
    return run_input(session_id, run_id, resume=[entry.model_dump(by_alias=True)])


def warnings(frames: Frames) -> list[dict[str, Any]]:
    return [e.value for e in of(frames, CustomEvent) if e.name == "duragent.warning"]


class ClientMessages:
    """The messages an AG-UI client holds, kept by the protocol's rules (AG-UI 1.0): its
    own message is added when it sends it, streamed messages and tool results are added,
    and a MESSAGES_SNAPSHOT replaces the messages it names in place, drops those it
    does not (reasoning aside, when it has none) and appends the new ones."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, message: UserMessage) -> None:
        self.messages.append(message.model_dump(mode="json", by_alias=True))

    def apply(self, frames: Frames) -> None:
        for _, event in frames:
            self._apply(event)

    def _find(self, message_id: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if m["id"] == message_id), None)

    def _apply(self, event: BaseEvent) -> None:
        if isinstance(event, TextMessageStartEvent) and not self._find(event.message_id):
            self.messages.append({"id": event.message_id, "role": event.role, "content": ""})
        elif isinstance(event, TextMessageContentEvent):
            found = self._find(event.message_id)
            assert found is not None, event
            found["content"] += event.delta
        elif isinstance(event, ToolCallResultEvent):
            self.messages.append(
                {"id": event.message_id, "role": "tool", "toolCallId": event.tool_call_id}
            )
        elif isinstance(event, MessagesSnapshotEvent):
            given = [m.model_dump(mode="json", by_alias=True) for m in event.messages]
            by_id = {m["id"]: m for m in given}
            keep_reasoning = not any(m["role"] == "reasoning" for m in given)
            kept = [
                by_id.get(m["id"], m)
                for m in self.messages
                if m["id"] in by_id or (m["role"] == "reasoning" and keep_reasoning)
            ]
            held = {m["id"] for m in kept}
            self.messages = kept + [m for m in given if m["id"] not in held]

    def user_texts(self) -> list[str]:
        return [m["content"] for m in self.messages if m["role"] == "user"]


def transcript_user_texts(stack: Stack, session_id: str) -> list[str]:
    """The user messages of the session's transcript (`duragent show`), in order."""
    return [
        text_of(entry.message.content)
        for entry in stack.client.sync.tree.path(session_id)
        if isinstance(entry, MessageEntry) and entry.message.role == "user"
    ]


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
        thought = "".join(e.delta for e in of(first, ReasoningMessageContentEvent))
        assert thought == "A file, then."  # thinking, as AG-UI reasoning
        # The client's own prompt, restated as the transcript has it (under its entry's
        # id), then the conversation again before the run finishes.
        restated = of(first, MessagesSnapshotEvent)
        assert [[m.role for m in r.messages] for r in restated] == [
            ["user"],
            ["user", "assistant"],
        ]
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
            MessagesSnapshotEvent,
            RunFinishedEvent,
        ]
        [(_, joined), (_, snapshot), (_, messages), (_, waits)] = watched
        # It has the transcript (the turn that waits is not saved yet: the interrupt tells
        # its call).
        assert isinstance(messages, MessagesSnapshotEvent)
        assert messages.messages == restated[-1].messages[:1]
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
        assert (Path((await stack.client.sessions.get(session)).workspace) / "out.txt").exists()

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
async def test_a_resume_that_denies_and_resumes_that_answer_nothing(
    stack: Stack, api: ApiServer
) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "agui-1"))
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        [interrupt] = finished.outcome.interrupts

        def answer(interrupt_id: str, payload: Any) -> dict[str, Any]:
            return resume_input(session, "agui-2", interrupt_id, payload)

        # A payload is checked against the schema the interrupt advertised: refused by
        # name, nothing decided, the interrupt still open.
        bad = await http.post("/api/agui", json=answer(interrupt.id, {"ok": True}))
        assert bad.status_code == 422 and "approved" in bad.json()["detail"]
        yes = await http.post("/api/agui", json=answer(interrupt.id, {"approved": "yes"}))
        assert yes.status_code == 422, yes.text
        assert "responseSchema" in yes.json()["detail"] and "boolean" in yes.json()["detail"]
        assert [p.call_id for p in await stack.client.approvals.pending(session)] == ["call_write"]

        # An interrupt this API never raised, or one that waits no more: a warning, and the
        # run goes on (here: it still waits, so the AG-UI run ends with its interrupt).
        for unknown, why in (
            ("survey:1", "approval:<id>, question:<id>"),
            ("approval:nope", "no longer waits"),
        ):
            again = await read_run(http, "POST", "/api/agui", json=answer(unknown, {}))
            [warned] = warnings(again)
            assert warned["code"] == "resume_ignored" and warned["interrupt_id"] == unknown
            assert why in warned["message"]
            last = again[-1][1]
            assert isinstance(last, RunFinishedEvent)
            assert isinstance(last.outcome, RunFinishedInterruptOutcome)
            assert [position_of(i.id)[0] for i in last.outcome.interrupts] == [
                "approval:call_write"
            ]

        deny = answer(interrupt.id, {"approved": False, "reason": "not on a Friday"})
        second = await read_run(http, "POST", "/api/agui", json=deny)
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_write" and "not on a Friday" in result.content
        # The denied result is an error in the conversation the run finishes with.
        [*_, conversation] = of(second, MessagesSnapshotEvent)
        [told] = [m for m in conversation.messages if isinstance(m, ToolMessage)]
        assert told.tool_call_id == "call_write" and told.error
        assert "not on a Friday" in told.error
        last = second[-1][1]
        assert isinstance(last, RunFinishedEvent)
        assert isinstance(last.outcome, RunFinishedSuccessOutcome)
        assert not (Path((await stack.client.sessions.get(session)).workspace) / "out.txt").exists()


@pytest.mark.script(SCRIPT)
async def test_a_resume_for_an_approval_decided_elsewhere_goes_on_with_a_warning(
    stack: Stack, api: ApiServer
) -> None:
    """The client holds the interrupt; someone approves the call on the REST API (as the
    page and the CLI do); the client's own answer then comes late: it is a warning, and
    its AG-UI run tells what happened since and finishes with the run."""
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        first = await read_run(http, "POST", "/api/agui", json=run_input(session, "agui-1"))
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        [interrupt] = finished.outcome.interrupts
        approved = await http.post(f"/api/sessions/{session}/approvals/call_write/approve")
        assert approved.status_code == 200, approved.text

        late = resume_input(session, "agui-2", interrupt.id, {"approved": False})
        second = await read_run(http, "POST", "/api/agui", json=late)
        assert isinstance(second[0][1], RunStartedEvent) and second[0][1].run_id == "agui-2"
        [warned] = warnings(second)
        assert warned["interrupt_id"] == interrupt.id and "no longer waits" in warned["message"]
        decided = [e for e in of(second, CustomEvent) if e.name == "duragent.approval_decided"]
        assert [e.value["decision"] for e in decided] == ["approve"]  # not the late deny
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_write"
        assert "".join(e.delta for e in of(second, TextMessageContentEvent)) == "All done."
        last = second[-1][1]
        assert isinstance(last, RunFinishedEvent)
        assert isinstance(last.outcome, RunFinishedSuccessOutcome)
        assert (Path((await stack.client.sessions.get(session)).workspace) / "out.txt").exists()

        # Once the run is over, a stale answer (no position: no run to follow) still opens
        # and finishes an AG-UI run of its own.
        stale = resume_input(session, "agui-3", "approval:call_write", {"approved": True})
        third = await read_run(http, "POST", "/api/agui", json=stale)
        assert [w["interrupt_id"] for w in warnings(third)] == ["approval:call_write"]
        ended = third[-1][1]
        assert isinstance(ended, RunFinishedEvent)
        assert isinstance(ended.outcome, RunFinishedSuccessOutcome)


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

        # The client that held the interrupt cancels it: a warning, and its AG-UI run goes
        # on from where it stopped, to the run's end.
        finished = first[-1][1]
        assert isinstance(finished, RunFinishedEvent)
        assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
        [interrupt] = finished.outcome.interrupts
        cancel = resume_input(session, "agui-2", interrupt.id, None, status="cancelled")
        cancelled = await read_run(http, "POST", "/api/agui", json=cancel)
        assert [w["interrupt_id"] for w in warnings(cancelled)] == [interrupt.id]
        ended = cancelled[-1][1]
        assert isinstance(ended, RunFinishedEvent)
        assert isinstance(ended.outcome, RunFinishedCancelledOutcome)


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
            return resume_input(session, "ask-2", interrupt.id, payload, status)

        # Not one of the choices the schema lists, no answer, a cancel: refused by name,
        # nothing answered.
        wrong = await http.post("/api/agui", json=answering({"answer": "MySQL"}))
        assert wrong.status_code == 422 and "one of the choices" in wrong.text
        assert (await http.post("/api/agui", json=answering({}))).status_code == 422
        number = await http.post("/api/agui", json=answering({"answer": 1}))
        assert number.status_code == 422 and "responseSchema" in number.text
        cancelled = await http.post("/api/agui", json=answering(None, "cancelled"))
        assert cancelled.status_code == 422 and "answered, not cancelled" in cancelled.text
        assert [q.call_id for q in await stack.client.questions.pending(session)] == ["call_ask"]

        # Answered elsewhere (as the CLI does) before the client's answer comes: the
        # client's is a warning, the run goes on with the first answer.
        await stack.client.questions.answer(session, "call_ask", "PostgreSQL", by="alice")
        second = await read_run(http, "POST", "/api/agui", json=answering({"answer": "SQLite"}))
        assert [w["interrupt_id"] for w in warnings(second)] == [interrupt.id]
        [result] = of(second, ToolCallResultEvent)
        assert result.tool_call_id == "call_ask" and "PostgreSQL" in result.content
        assert "".join(e.delta for e in of(second, TextMessageContentEvent)) == "Noted."
        done = second[-1][1]
        assert isinstance(done, RunFinishedEvent)
        assert isinstance(done.outcome, RunFinishedSuccessOutcome)


ORDER_SCRIPT = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "Working on it."}]},
            {"reply": [{"text": "Noted."}]},
        ]
    }
}


@pytest.mark.script(ORDER_SCRIPT)
async def test_messages_sent_while_a_run_is_busy_keep_the_transcripts_order(
    stack: Stack, api: ApiServer
) -> None:
    """Two messages a client sends while a run is busy (then a third): the messages the
    client holds by the protocol's rules are, in the end, the transcript's, in its order,
    each once; `duragent show --full` prints them in that order too."""
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.runs.prompt(session, "start")  # another client's run
        await eventually(lambda: bool(stack.model.requests_for(session)))
        mine = ClientMessages()
        sent: list[UserMessage] = []

        async def send(message_id: str, text: str) -> asyncio.Task[Frames]:
            message = UserMessage(id=message_id, content=text)
            mine.send(message)
            sent.append(message)
            body = run_input(session, f"agui-{message_id}", messages=list(sent))
            answered = asyncio.Event()
            stream = asyncio.create_task(
                read_run(http, "POST", "/api/agui", json=body, answered=answered)
            )
            await answered.wait()  # taken: the next one is sent after it
            return stream

        first = await send("mine-1", "first thing")
        second = await send("mine-2", "second thing")
        stack.model.release("go")
        for stream in (first, second):
            mine.apply(await stream)
        third = await send("mine-3", "third thing")
        mine.apply(await third)

        def settled() -> bool:
            # Every message taken by a run (the third may start one of its own, a moment
            # after the run before it ended), and that run over.
            taken = len(transcript_user_texts(stack, session)) == 4
            return taken and run_finished(stack, session)

        await eventually(settled)
        transcript = transcript_user_texts(stack, session)
        assert transcript == ["start", "first thing", "second thing", "third thing"]
        assert mine.user_texts() == transcript
        shown = await stack.cli_ok("show", session, "--full")
        assert shown.index("first thing") < shown.index("second thing") < shown.index("third")


FOLLOW_SCRIPT = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "Busy work done."}]},
            {"reply": [{"text": "Here is your answer."}]},
            {"wait_for": "never", "reply": [{"text": "Not said."}]},
            {"reply": [{"text": "Fine."}]},
        ]
    }
}


def texts(frames: Frames) -> list[str]:
    """The text of each text message told, in order."""
    said: dict[str, str] = {}
    for event in of(frames, TextMessageStartEvent):
        said[event.message_id] = ""
    for event in of(frames, TextMessageContentEvent):
        said[event.message_id] += event.delta
    return list(said.values())


def one_agui_run(frames: Frames) -> RunFinishedEvent:
    """The frames are one AG-UI run: one RUN_STARTED first, one RUN_FINISHED last."""
    kinds = [event.type.value for _, event in frames]
    assert kinds[0] == "RUN_STARTED" and kinds.count("RUN_STARTED") == 1, kinds
    assert kinds[-1] == "RUN_FINISHED" and kinds.count("RUN_FINISHED") == 1, kinds
    assert "RUN_ERROR" not in kinds
    end = frames[-1][1]
    assert isinstance(end, RunFinishedEvent)
    return end


async def send_while_busy(
    stack: Stack, http: Any, session: str, message: UserMessage, run_id: str
) -> tuple[asyncio.Task[Frames], str]:
    """POST a message while the session's run is busy: its AG-UI run, and the id of the
    queue item it waits as."""
    answered = asyncio.Event()
    body = run_input(session, run_id, messages=[message])
    stream = asyncio.create_task(read_run(http, "POST", "/api/agui", json=body, answered=answered))
    await answered.wait()  # the response began: the input is queued
    [item] = [i for i in await stack.client.inputs.queue(session) if i.text == message.content]
    return stream, item.id


@pytest.mark.script(FOLLOW_SCRIPT)
async def test_a_message_sent_while_a_run_is_busy_gets_its_answer_in_its_agui_run(
    stack: Stack, api: ApiServer
) -> None:
    """Another client's run is busy; this client's message waits in the queue. Its AG-UI
    run tells the busy run's end as it goes, follows on into the run that takes the
    message, and finishes with that run: the answer is in it. A watch from where the
    POST's stream began ends there too."""
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        busy = await stack.client.runs.prompt(session, "start")  # another client's run
        await eventually(lambda: bool(stack.model.requests_for(session)))
        cursor = await stack.client.events.cursor(session)
        mine = ClientMessages()
        question = UserMessage(id="mine-1", content="my question")
        mine.send(question)
        stream, item_id = await send_while_busy(stack, http, session, question, "agui-q")
        stack.model.release("go")
        frames = await stream

        end = one_agui_run(frames)
        assert end.run_id == "agui-q"
        assert isinstance(end.outcome, RunFinishedSuccessOutcome)
        # The busy run's reply (the transcript has it before the message), then the answer.
        assert texts(frames) == ["Busy work done.", "Here is your answer."]
        passed = [e.value for e in of(frames, CustomEvent) if e.name == "duragent.agent_end"]
        assert [(p["run_id"], p["status"]) for p in passed] == [(busy.run_id, "completed")]
        answering = (await stack.client.inputs.item(session, item_id)).run_id
        assert answering and answering != busy.run_id
        assert (await stack.client.runs.get(answering)).kind == "queued"  # type: ignore[union-attr]
        assert state_after(frames)["run_id"] == answering
        assert state_after(frames)["phase"] == "idle"
        taken = [e.value for e in of(frames, CustomEvent) if e.name == "duragent.queue_consumed"]
        assert [t["entry_id"] for t in taken] == [item_id]
        # The client's list is the transcript, its message where the run took it.
        mine.apply(frames)
        path = [e for e in await stack.client.tree.path(session) if isinstance(e, MessageEntry)]
        assert [m["id"] for m in mine.messages] == [e.id for e in path]
        assert [m["content"] for m in mine.messages[-2:]] == ["my question", "Here is your answer."]

        # A watch resuming from where the POST's stream began ends with the same run.
        watched = await read_run(http, "GET", f"/api/sessions/{session}/agui?after={cursor}")
        watch_end = one_agui_run(watched)
        assert isinstance(watch_end.outcome, RunFinishedSuccessOutcome)
        assert texts(watched)[-1] == "Here is your answer."
        assert state_after(watched)["run_id"] == answering


@pytest.mark.script(FOLLOW_SCRIPT)
async def test_a_queued_message_whose_item_is_cancelled_ends_its_agui_run_cancelled(
    stack: Stack, api: ApiServer
) -> None:
    """The message's queue item deleted while the run is busy: its AG-UI run ends then,
    cancelled, saying why, and the client's list drops it. Another stopped with the busy
    run: the same, when the stop comes."""
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.runs.prompt(session, "start")
        await eventually(lambda: bool(stack.model.requests_for(session)))
        mine = ClientMessages()
        first = UserMessage(id="mine-1", content="first thought")
        mine.send(first)
        stream, item_id = await send_while_busy(stack, http, session, first, "agui-1")
        deleted = await http.delete(f"/api/sessions/{session}/input-queue/{item_id}")
        assert deleted.status_code == 204, deleted.text
        frames = await stream
        end = one_agui_run(frames)
        assert isinstance(end.outcome, RunFinishedCancelledOutcome)
        [said] = [e.value for e in of(frames, CustomEvent) if e.name == "duragent.input_cancelled"]
        assert (said["item_id"], said["reason"]) == (item_id, "withdrawn")
        assert not run_finished(stack, session)  # ended then, the busy run still at work
        mine.apply(frames)
        assert "first thought" not in mine.user_texts()

        second = UserMessage(id="mine-2", content="second thought")
        stream, item_id = await send_while_busy(stack, http, session, second, "agui-2")
        assert (await http.post(f"/api/sessions/{session}/stop")).status_code == 200
        frames = await stream
        end = one_agui_run(frames)
        assert isinstance(end.outcome, RunFinishedCancelledOutcome)
        [said] = [e.value for e in of(frames, CustomEvent) if e.name == "duragent.input_cancelled"]
        assert (said["item_id"], said["reason"]) == (item_id, "stopped")
        assert state_after(frames)["phase"] == "idle"
        [snapshot, *_] = reversed(of(frames, MessagesSnapshotEvent))
        assert "second thought" not in [m.content for m in snapshot.messages]
        assert (await stack.client.inputs.item(session, item_id)).status == "cancelled"


@pytest.mark.script(FOLLOW_SCRIPT)
async def test_a_client_that_leaves_ends_its_agui_run_and_its_message_still_runs(
    stack: Stack, api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait for the run that takes a queued message lasts as long as the client's
    stream: a client that leaves ends it at once. The message runs all the same, and a
    watch from where the stream began tells the answer."""
    caplog.set_level(logging.INFO, logger="duragent.api.routes_agui")
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.runs.prompt(session, "start")
        await eventually(lambda: bool(stack.model.requests_for(session)))
        cursor = await stack.client.events.cursor(session)
        body = run_input(session, "agui-1", messages=[UserMessage(id="m", content="my question")])
        async with http.stream("POST", "/api/agui", json=body) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data: ") and "RUN_STARTED" in line:
                    break  # and the client leaves
        await eventually(lambda: "ended: the client left" in caplog.text)

        stack.model.release("go")
        watched = await read_run(http, "GET", f"/api/sessions/{session}/agui?after={cursor}")
        assert isinstance(one_agui_run(watched).outcome, RunFinishedSuccessOutcome)
        assert texts(watched) == ["Busy work done.", "my question", "Here is your answer."]


WAIT_SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"text": "Running it."}, bash_call("echo hi", "call_1")]},
            {"reply": [{"text": "Ran it."}]},
            {"reply": [{"text": "Read your note."}]},
        ]
    }
}


@pytest.mark.script(WAIT_SCRIPT)
async def test_a_resume_follows_on_into_the_run_its_queued_message_starts(
    stack: Stack, api: ApiServer
) -> None:
    """A message sent while the busy run waits for an approval: its AG-UI run ends with
    that interrupt. The client's resume answers it and goes on past the busy run's end
    into the run that takes the message; the client's list is the transcript, its message
    after the busy run's last words though it held it before them."""
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        await stack.client.runs.prompt(session, "run echo")  # another client's run

        async def waiting() -> bool:
            return bool(await stack.client.approvals.pending(session))

        await eventually(waiting)
        mine = ClientMessages()
        note = UserMessage(id="mine-1", content="a note for later")
        mine.send(note)
        body = run_input(session, "agui-1", messages=[note])
        first = await read_run(http, "POST", "/api/agui", json=body)
        end = one_agui_run(first)
        assert isinstance(end.outcome, RunFinishedInterruptOutcome)
        [interrupt] = end.outcome.interrupts
        mine.apply(first)

        approve = ResumeEntry(
            interrupt_id=interrupt.id, status="resolved", payload={"approved": True}
        )
        body = run_input(
            session, "agui-2", messages=mine.messages, resume=[approve.model_dump(by_alias=True)]
        )
        second = await read_run(http, "POST", "/api/agui", json=body)
        end = one_agui_run(second)
        assert isinstance(end.outcome, RunFinishedSuccessOutcome)
        assert texts(second) == ["Ran it.", "Read your note."]
        mine.apply(second)
        path = [e for e in await stack.client.tree.path(session) if isinstance(e, MessageEntry)]
        assert [m["id"] for m in mine.messages] == [e.id for e in path]
        assert [m["content"] for m in mine.messages if m["role"] == "user"] == [
            "run echo",
            "a note for later",
        ]


AGUI_CLIENT = REPO / "tests" / "agui_client"
"""The official AG-UI client's folder: `npm ci` there installs `@ag-ui/client`."""
REQUIRE_AGUI_CLIENT = "DURAGENT_REQUIRE_AGUI_CLIENT"


def agui_client_command() -> list[str]:
    """How to start `drive.mjs`: node and the installed client, or the test is skipped
    (failed when `DURAGENT_REQUIRE_AGUI_CLIENT` is set, as CI sets it)."""
    node = shutil.which("node")
    installed = (AGUI_CLIENT / "node_modules" / "@ag-ui" / "client" / "package.json").exists()
    if node and installed:
        return [node, str(AGUI_CLIENT / "drive.mjs")]
    reason = (
        "the official AG-UI client is not installed: it needs node (20 or later) and "
        f"`npm ci` in {AGUI_CLIENT}"
    )
    if os.environ.get(REQUIRE_AGUI_CLIENT):
        pytest.fail(reason)
    pytest.skip(reason)


class OfficialClient:
    """`@ag-ui/client`'s HttpAgent on one thread, in node (`tests/agui_client/drive.mjs`)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, command: list[str], api: ApiServer, thread_id: str) -> OfficialClient:
        url = f"http://127.0.0.1:{api.port}/api/agui"
        process = await asyncio.create_subprocess_exec(
            *command,
            url,
            ApiServer.TOKEN,
            thread_id,
            cwd=AGUI_CLIENT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=sys.stderr,
        )
        return cls(process)

    async def ask(self, **command: Any) -> dict[str, Any]:
        """Send a command (`send` a text, `resume` every pending interrupt) and wait for the
        client's run to end: its events, messages and pending interrupts."""
        assert self._process.stdin and self._process.stdout
        self._process.stdin.write(json.dumps(command).encode() + b"\n")
        await self._process.stdin.drain()
        line = await asyncio.wait_for(self._process.stdout.readline(), timeout=60)
        assert line, "the AG-UI client exited"
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        await asyncio.wait_for(self._process.wait(), timeout=10)


def custom(answer: dict[str, Any], name: str) -> list[Any]:
    return [e["value"] for e in answer["events"] if e["type"] == "CUSTOM" and e["name"] == name]


def finished(answer: dict[str, Any]) -> dict[str, Any]:
    [end] = [e for e in answer["events"] if e["type"] == "RUN_FINISHED"]
    outcome: dict[str, Any] = end.get("outcome") or {"type": "success"}
    return outcome


OFFICIAL_SCRIPT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {"thinking": "A file, then."},
                    {"text": "Writing it."},
                    bash_call("echo ran > out.txt", "call_write"),
                ]
            },
            {"reply": [{"text": "All done."}]},
            {"reply": [{"text": "You are welcome."}]},
            {"reply": [bash_call("rm out.txt", "call_remove")]},
            {"reply": [{"text": "Left it there."}]},
        ]
    }
}


@pytest.mark.script(OFFICIAL_SCRIPT)
async def test_the_official_client_is_not_wedged_by_an_interrupt_decided_elsewhere(
    stack: Stack, api: ApiServer
) -> None:
    """`@ag-ui/client`'s HttpAgent holds an approval as an interrupt; the call is approved
    on the REST API meanwhile; the client's resume is taken (a warning), the run goes on,
    and the client is free: its next message runs. Its messages are the transcript's, in
    order, a denied call's result marked as an error, its thinking as a reasoning
    message."""
    command = agui_client_command()  # skipped (or failed, in CI) before anything starts
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.approvals.set_policy(session, ASK_BASH)
        agent = await OfficialClient.start(command, api, session)
        try:
            first = await agent.ask(op="send", text="write it")
            assert first["ok"], first
            assert finished(first)["type"] == "interrupt"
            [held] = first["pendingInterrupts"]
            assert held["toolCallId"] == "call_write"

            approved = await http.post(f"/api/sessions/{session}/approvals/call_write/approve")
            assert approved.status_code == 200, approved.text

            resumed = await agent.ask(op="resume", status="resolved", payload={"approved": True})
            assert resumed["ok"], resumed  # before: a 409, and the thread stuck for good
            [warned] = custom(resumed, "duragent.warning")
            assert warned["interrupt_id"] == held["id"]
            assert [d["by"] for d in custom(resumed, "duragent.approval_decided")] == ["alice"]
            assert finished(resumed)["type"] == "success"
            assert resumed["pendingInterrupts"] == []
            assert (Path((await stack.client.sessions.get(session)).workspace) / "out.txt").exists()

            thanks = await agent.ask(op="send", text="thanks")
            assert thanks["ok"], thanks  # not "Thread has 1 pending interrupt(s) ..."
            assert finished(thanks)["type"] == "success"

            # A call the client denies: its result is an error in the client's messages.
            again = await agent.ask(op="send", text="now remove it")
            assert finished(again)["type"] == "interrupt"
            denied = await agent.ask(
                op="resume", status="resolved", payload={"approved": False, "reason": "keep it"}
            )
            assert denied["ok"] and finished(denied)["type"] == "success", denied
        finally:
            await agent.close()

        messages = denied["messages"]
        [tool_error] = [m["error"] for m in messages if m.get("toolCallId") == "call_remove"]
        assert "keep it" in tool_error
        [fine] = [m for m in messages if m.get("toolCallId") == "call_write"]
        assert "error" not in fine
        [reasoning] = [m for m in messages if m["role"] == "reasoning"]
        assert reasoning["content"] == "A file, then."
        path = [e for e in await stack.client.tree.path(session) if isinstance(e, MessageEntry)]
        conversation = [m for m in messages if m["role"] != "reasoning"]
        assert [m["id"] for m in conversation] == [e.id for e in path]
        assert [m["content"] for m in conversation if m["role"] == "user"] == [
            "write it",
            "thanks",
            "now remove it",
        ]


@pytest.mark.script(FOLLOW_SCRIPT)
async def test_the_official_client_gets_the_answer_to_a_message_sent_while_a_run_is_busy(
    stack: Stack, api: ApiServer
) -> None:
    """`@ag-ui/client`'s HttpAgent sends while another client's run is busy: `runAgent`
    resolves with the answer the queued run gave, in the same AG-UI run. A message whose
    item a stop cancels resolves cancelled, and the client goes on."""
    command = agui_client_command()
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        await stack.client.runs.prompt(session, "start")
        await eventually(lambda: bool(stack.model.requests_for(session)))
        agent = await OfficialClient.start(command, api, session)
        try:

            async def queued(text: str) -> asyncio.Task[dict[str, Any]]:
                asking = asyncio.create_task(agent.ask(op="send", text=text))
                await eventually(
                    lambda: any(i.text == text for i in stack.client.sync.inputs.queue(session))
                )
                return asking

            asking = await queued("my question")
            stack.model.release("go")
            answer = await asking
            assert answer["ok"], answer
            assert finished(answer)["type"] == "success"
            kinds = [e["type"] for e in answer["events"]]
            assert kinds.count("RUN_STARTED") == 1 and kinds.count("RUN_FINISHED") == 1
            added = [(m["role"], m["content"]) for m in answer["newMessages"]]
            assert added[-2:] == [("user", "my question"), ("assistant", "Here is your answer.")]
            path = [e for e in await stack.client.tree.path(session) if isinstance(e, MessageEntry)]
            assert [m["id"] for m in answer["messages"]] == [e.id for e in path]

            await eventually(lambda: run_finished(stack, session))
            await stack.client.runs.prompt(session, "more")  # held by its model call
            await eventually(lambda: len(stack.model.requests_for(session)) == 3)
            stopping = await queued("never mind")
            assert (await http.post(f"/api/sessions/{session}/stop")).status_code == 200
            stopped = await stopping
            assert stopped["ok"], stopped
            assert finished(stopped)["type"] == "cancelled"
            [said] = custom(stopped, "duragent.input_cancelled")
            assert said["reason"] == "stopped"
            assert "never mind" not in [m.get("content") for m in stopped["messages"]]
            assert stopped["pendingInterrupts"] == []

            after = await agent.ask(op="send", text="thanks")  # the client is free
            assert after["ok"] and finished(after)["type"] == "success", after
            assert [m["content"] for m in after["newMessages"]][-1] == "Fine."
        finally:
            await agent.close()
