"""Run events as AG-UI events (`api/agui_events.py`): what the integration test's run does
not meet. A model call made again, a message a save point tells again, events of no run,
an interrupt's position, thinking as reasoning, the client's own messages, the
conversation as AG-UI messages (`api/agui_messages.py`), ends an AG-UI run goes on past
or holds (`api/agui_follow.py`), a cancelled input, a snapshot that restores order."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    AssistantMessage,
    CustomEvent,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ReasoningMessageContentEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolMessage,
    UserMessage,
)

from duragent.api.agui_events import AguiRun, HeaderState
from duragent.api.agui_follow import HOLD, PASS, Ending
from duragent.api.agui_messages import as_messages, newest
from duragent.api.agui_waits import position_of
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import (
    AssistantMessage as StoredReply,
)
from duragent.domain.messages import (
    TextContent,
    ToolCall,
    ToolResultMessage,
    user_text,
)
from duragent.store.records import StoredEvent

pytestmark = pytest.mark.fast


def stored(
    seq: int, event_type: str, run_id: str | None = "run-1", /, **payload: Any
) -> StoredEvent:
    return StoredEvent(
        seq=seq,
        session_id="s",
        run_id=run_id,
        type=event_type,
        payload={"type": event_type, **payload},
        created_at=1,
    )


def text(entry_id: str, delta: str, attempt: int = 1) -> dict[str, Any]:
    return {
        "entry_id": entry_id,
        "attempt": attempt,
        "content_index": 0,
        "kind": "text",
        "delta": delta,
    }


def reply(words: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": words}], "timestamp": 1}


def test_events_of_no_run_open_none() -> None:
    run = AguiRun("s", HeaderState())
    assert (
        run.translate(stored(1, "compaction_start", None, reason="manual", tokens_before=9)) == []
    )
    [started, _snapshot, custom] = run.translate(
        stored(2, "retry_scheduled", turn=1, attempt=1, delay_ms=5, error="x")
    )
    assert isinstance(started, RunStartedEvent) and started.run_id == "run-1"
    assert isinstance(custom, CustomEvent) and custom.name == "duragent.retry_scheduled"


def test_a_model_call_made_again_is_a_new_message_and_a_repeat_is_told_once() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    first = run.translate(stored(1, "message_update", **text("e1", "Hel")))
    assert [type(e) for e in first] == [TextMessageStartEvent, TextMessageContentEvent]
    again = run.translate(stored(2, "message_start", entry_id="e1", message=reply("")))
    assert [type(e) for e in again] == [TextMessageEndEvent]
    second = run.translate(stored(3, "message_update", **text("e1", "Hello", attempt=2)))
    assert isinstance(second[0], TextMessageStartEvent) and second[0].message_id == "e1:2"
    ended = run.translate(stored(4, "message_end", entry_id="e1", message=reply("Hello")))
    assert isinstance(ended[0], TextMessageEndEvent)
    assert run.translate(stored(5, "message_end", entry_id="e1", message=reply("Hello"))) == []


def test_a_joined_reply_comes_whole_and_the_clients_own_message_is_restated() -> None:
    mine = UserMessage(id="client-1", content="hi")
    run = AguiRun("s", HeaderState(), held=[mine])
    user = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    opened = run.translate(stored(1, "message_end", entry_id="u", message=user))
    # Not echoed as a text message: the client holds it, where it sent it; the
    # conversation replaces that copy with the stored one, where the transcript has it.
    assert [e.type for e in opened] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert run.wants_messages
    [snapshot] = run.with_messages([UserMessage(id="u", content="hi")], [])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["u"] and not run.wants_messages
    other = {"role": "user", "content": [{"type": "text", "text": "and you?"}], "timestamp": 1}
    theirs = run.translate(stored(2, "message_end", entry_id="u2", message=other))
    assert isinstance(theirs[0], TextMessageStartEvent) and theirs[0].role == "user"
    whole = run.translate(stored(3, "message_end", entry_id="e2", message=reply("Done.")))
    assert [type(e) for e in whole][:3] == [
        TextMessageStartEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
    ]
    assert isinstance(whole[1], TextMessageContentEvent) and whole[1].delta == "Done."
    # What the client holds (its input, a snapshot) is never told again.
    assert run.translate(stored(4, "message_end", entry_id="u", message=user)) == []
    assert run.translate(stored(5, "message_update", **text("u", "x"))) == []


def test_the_clients_queued_messages_move_last_under_their_items_ids() -> None:
    """The client's own messages that wait in the input queue are last in the
    conversation, under their items' ids (the ids of the entries the run that takes them
    writes), in the queue's order; the client's copies go."""
    a, b = UserMessage(id="a", content="first"), UserMessage(id="b", content="second")
    run = AguiRun("s", HeaderState(), held=[UserMessage(id="p", content="go"), a, b])
    run.start(None)
    stored_p = UserMessage(id="p", content="go")
    reply_ = AssistantMessage(id="r", content="Working.")
    queued = [("q-a", "first"), ("q-other", "someone else's"), ("q-b", "second")]
    [snapshot] = run.with_messages([stored_p, reply_], queued)
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p", "r", "q-a", "q-b"]
    taken = UserMessage(id="q-a", content="first")
    [snapshot] = run.with_messages([stored_p, reply_, taken], [("q-b", "second")])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p", "r", "q-a", "q-b"]


def test_the_message_sent_stays_until_the_transcript_has_it() -> None:
    """A message on its way to a run that starts later (neither queued nor in the
    transcript when the AG-UI run ends) stays in the client's list, last, as it sent it;
    once a run took it, the stored one replaces it."""
    sent = UserMessage(id="c", content="third")
    run = AguiRun("s", HeaderState(), held=[sent], sent=sent)
    run.start(None)
    # The client keeps what it holds in its own order: an empty snapshot first drops its
    # copy, so the full one puts it after the older message it lacked.
    [cut, snapshot] = run.with_messages([UserMessage(id="p", content="go")], [])
    assert isinstance(cut, MessagesSnapshotEvent) and cut.messages == []
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p", "c"]
    user = {"role": "user", "content": [{"type": "text", "text": "third"}], "timestamp": 1}
    run.translate(stored(1, "message_end", entry_id="e-c", message=user))
    taken = UserMessage(id="e-c", content="third")
    [snapshot] = run.with_messages([UserMessage(id="p", content="go"), taken], [])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p", "e-c"]
    # Taken before the stream told it (the transcript is read after the events): not twice.
    early = AguiRun("s", HeaderState(), held=[sent], sent=sent)
    early.start(None)
    [snapshot] = early.with_messages([UserMessage(id="p", content="go"), taken], [])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p", "e-c"]


def test_an_interrupt_names_where_its_run_stopped() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    assert run.interrupt([Interrupt(id="approval:c1", reason="tool_approval")], 41) == []
    assert run.wants_messages and not run.finished  # the conversation comes first
    [snapshot, finished] = run.with_messages([], [])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert isinstance(finished, RunFinishedEvent) and run.finished
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    [interrupt] = finished.outcome.interrupts
    assert position_of(interrupt.id) == ("approval:c1", 41)
    assert position_of("approval:c1") == ("approval:c1", None)
    assert run.interrupt([], 42) == []


def thinking(entry_id: str, delta: str, index: int = 0) -> dict[str, Any]:
    return {**text(entry_id, delta), "kind": "thinking", "content_index": index}


def test_thinking_is_a_reasoning_span_before_the_text() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    events = [
        *run.translate(stored(1, "message_update", **thinking("e1", "Let me "))),
        *run.translate(stored(2, "message_update", **thinking("e1", "see."))),
        *run.translate(stored(3, "message_update", **{**text("e1", "Hi"), "content_index": 1})),
        *run.translate(stored(4, "message_end", entry_id="e1", message=reply("Hi"))),
    ]
    assert [e.type for e in events if e.type != "STATE_DELTA"] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    said = [e.delta for e in events if isinstance(e, ReasoningMessageContentEvent)]
    assert "".join(said) == "Let me see."
    ids = {getattr(e, "message_id", None) for e in events if e.type.startswith("REASONING")}
    assert ids == {"e1:reasoning:0"}  # apart from the text message "e1"
    # A reply joined after its deltas brings its thinking whole, then its text.
    joined = AguiRun("s", HeaderState(), run_id="agui-2")
    joined.start(None)
    message = {
        **reply("Hi"),
        "content": [{"type": "thinking", "thinking": "Hmm."}, {"type": "text", "text": "Hi"}],
    }
    whole = joined.translate(stored(5, "message_end", entry_id="e2", message=message))
    assert [e.type for e in whole if e.type != "STATE_DELTA"][:5] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]


def test_a_run_that_ends_inside_its_thinking_closes_the_span() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    run.translate(stored(1, "message_update", **thinking("e1", "Hmm")))
    ended = run.translate(
        stored(2, "agent_end", run_id="run-1", status="aborted", usage={}, error=None)
    )
    assert [e.type for e in ended][:2] == ["REASONING_MESSAGE_END", "REASONING_END"]
    [_, finished] = run.with_messages([], [])
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None and finished.outcome.type == "cancelled"


def test_a_failed_or_denied_tool_result_is_an_error_in_the_conversation() -> None:
    call = ToolCall(id="c1", name="bash", arguments={"command": "rm -rf /"})
    path = [
        MessageEntry(id="u", parent_id=None, timestamp=1, message=user_text("go", 1)),
        MessageEntry(
            id="a",
            parent_id="u",
            timestamp=1,
            message=StoredReply(content=[TextContent(text="On it."), call], timestamp=1),
        ),
        MessageEntry(
            id="r",
            parent_id="a",
            timestamp=1,
            message=ToolResultMessage(
                tool_call_id="c1",
                tool_name="bash",
                content=[TextContent(text="Denied: not in prod")],
                is_error=True,
                timestamp=1,
            ),
        ),
    ]
    [user, assistant, result] = as_messages(path)
    assert isinstance(user, UserMessage) and user.content == "go"
    assert isinstance(assistant, AssistantMessage) and assistant.content == "On it."
    assert assistant.tool_calls and assistant.tool_calls[0].function.name == "bash"
    assert isinstance(result, ToolMessage) and result.error == "Denied: not in prod"
    fine = path[2].model_copy(
        update={"message": path[2].message.model_copy(update={"is_error": False})}
    )
    [*_, ok] = as_messages([*path[:2], fine])
    assert isinstance(ok, ToolMessage) and ok.error is None
    # Cut to fit: the newest messages, never a result without its call.
    assert [m.id for m in newest(as_messages(path), limit=1)] == []
    size = len(as_messages(path)[2].model_dump_json(by_alias=True)) + 1
    assert newest(as_messages(path), limit=size) == []


def ended(seq: int, run_id: str, status: str = "completed", error: str | None = None) -> Any:
    return stored(seq, "agent_end", run_id, run_id=run_id, status=status, usage={}, error=error)


def test_an_end_passed_by_goes_on_into_the_run_that_answers() -> None:
    """The busy run's end is not the AG-UI run's end when its input waits for the next
    run: it is told as a `duragent.agent_end` and the state goes idle; the next run's
    start sets the state's run, and its end finishes the one AG-UI run."""
    mine = UserMessage(id="client-1", content="and this?")
    state = HeaderState(phase="turn", run_id="busy")
    run = AguiRun("s", state, run_id="agui-1", held=[mine], sent=mine)
    [started, _] = run.start(None)
    passed = run.translate(ended(1, "busy"), PASS)
    assert [e.type for e in passed] == ["STATE_DELTA", "CUSTOM"]
    assert isinstance(passed[1], CustomEvent) and passed[1].name == "duragent.agent_end"
    assert not run.wants_messages and not run.finished
    nxt = run.translate(stored(2, "agent_start", "next", run_id="next"))
    [delta] = nxt
    assert isinstance(delta, StateDeltaEvent)
    assert {"op": "replace", "path": "/run_id", "value": "next"} in [
        op.model_dump() for op in delta.delta
    ]
    user = {"role": "user", "content": [{"type": "text", "text": "and this?"}], "timestamp": 1}
    assert run.translate(stored(3, "message_end", "next", entry_id="q-1", message=user)) == []
    assert run.wants_messages  # its own message, where the transcript has it
    run.with_messages([UserMessage(id="q-1", content="and this?")], [])
    run.translate(stored(4, "message_end", "next", entry_id="a-1", message=reply("Yes.")))
    run.translate(ended(5, "next"))
    [snapshot, finished] = run.with_messages(
        [UserMessage(id="q-1", content="and this?"), AssistantMessage(id="a-1", content="Yes.")],
        [],
    )
    assert [m.id for m in snapshot.messages] == ["q-1", "a-1"]
    assert isinstance(finished, RunFinishedEvent) and finished.run_id == started.run_id
    assert finished.outcome is not None and finished.outcome.type == "success"


def test_a_held_end_finishes_with_its_outcome_when_no_run_follows() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    run.translate(ended(1, "r1", "error", "the model failed"), HOLD)
    assert run.holding and not run.wants_messages
    assert run.finish_held() == [] and run.wants_messages
    [_, error] = run.with_messages([], [])
    assert isinstance(error, RunErrorEvent) and error.message == "the model failed"
    # A run that starts goes on with it instead.
    going = AguiRun("s", HeaderState(), run_id="agui-2")
    going.start(None)
    going.translate(ended(1, "r1"), HOLD)
    going.translate(stored(2, "agent_start", "r2", run_id="r2"))
    assert not going.holding and going.finish_held() == []


def test_input_cancelled_before_a_run_took_it_finishes_cancelled() -> None:
    """The client's copy of its message goes (the transcript never has it), a CUSTOM
    event says why, and the outcome is AG-UI's `cancelled`."""
    mine = UserMessage(id="client-1", content="and this?")
    run = AguiRun("s", HeaderState(), run_id="agui-1", held=[mine], sent=mine)
    run.start(None)
    stopped = Ending("cancelled", "q-1", "stopped")
    out = run.translate(ended(1, "busy", "aborted"), stopped)
    said = [e for e in out if isinstance(e, CustomEvent)]
    assert [e.name for e in said] == ["duragent.agent_end", "duragent.input_cancelled"]
    assert said[1].value["item_id"] == "q-1" and said[1].value["reason"] == "stopped"
    assert "Stop" in said[1].value["message"]
    [snapshot, finished] = run.with_messages([UserMessage(id="p", content="go")], [])
    assert isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in snapshot.messages] == ["p"]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None and finished.outcome.type == "cancelled"
    assert run.finished and run.cancel_input(stopped) == []


def test_a_snapshot_puts_back_in_order_what_the_client_holds_out_of_it() -> None:
    """The client holds its queued message under the item's id; the busy run then says
    more, which the client appends after it. The snapshot is preceded by one cut before
    the first message out of place: the client drops what follows, and the full snapshot
    appends it in the transcript's order."""
    held: list[Message] = [
        UserMessage(id="u0", content="go"),
        UserMessage(id="q-x", content="mine"),
    ]
    run = AguiRun("s", HeaderState(), run_id="agui-1", held=held)
    run.start(None)
    run.translate(stored(1, "message_end", entry_id="a0", message=reply("Done first.")))
    path: list[Message] = [
        UserMessage(id="u0", content="go"),
        AssistantMessage(id="a0", content="Done first."),
        UserMessage(id="q-x", content="mine"),
    ]
    [cut, snapshot] = run.with_messages(path, [])
    assert isinstance(cut, MessagesSnapshotEvent) and isinstance(snapshot, MessagesSnapshotEvent)
    assert [m.id for m in cut.messages] == ["u0"]
    assert [m.id for m in snapshot.messages] == ["u0", "a0", "q-x"]
    # Held in order from then on: one snapshot.
    run.translate(stored(2, "message_end", entry_id="a1", message=reply("Yours.")))
    [again] = run.with_messages([*path, AssistantMessage(id="a1", content="Yours.")], [])
    assert isinstance(again, MessagesSnapshotEvent)
    assert [m.id for m in again.messages] == ["u0", "a0", "q-x", "a1"]
