"""Run events as AG-UI events (`api/agui_events.py`): what the integration test's run does
not meet. A model call made again, a message a save point tells again, events of no run,
and an interrupt's position."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import (
    CustomEvent,
    Interrupt,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from duragent.api.agui_events import AguiRun, HeaderState
from duragent.api.agui_waits import position_of
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


def test_a_joined_reply_comes_whole_and_the_clients_own_prompt_is_not_echoed() -> None:
    run = AguiRun("s", HeaderState(), sent_text="hi")
    user = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    opened = run.translate(stored(1, "message_end", entry_id="u", message=user))
    assert [e.type for e in opened] == ["RUN_STARTED", "STATE_SNAPSHOT"]  # no text
    other = run.translate(stored(2, "message_end", entry_id="u2", message=user))
    assert isinstance(other[0], TextMessageStartEvent) and other[0].role == "user"  # a 2nd one
    whole = run.translate(stored(3, "message_end", entry_id="e2", message=reply("Done.")))
    assert [type(e) for e in whole][:3] == [
        TextMessageStartEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
    ]
    assert isinstance(whole[1], TextMessageContentEvent) and whole[1].delta == "Done."


def test_an_interrupt_names_where_its_run_stopped() -> None:
    run = AguiRun("s", HeaderState(), run_id="agui-1")
    run.start(None)
    [finished] = run.interrupt([Interrupt(id="approval:c1", reason="tool_approval")], 41)
    assert isinstance(finished, RunFinishedEvent) and run.finished
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    [interrupt] = finished.outcome.interrupts
    assert position_of(interrupt.id) == ("approval:c1", 41)
    assert position_of("approval:c1") == ("approval:c1", None)
    assert run.interrupt([], 42) == []
