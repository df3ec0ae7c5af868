"""Pairing repair and context building: pure functions over hand-built messages."""

from __future__ import annotations

import pytest

from duragent.domain.config import SessionConfig
from duragent.domain.context import build_context
from duragent.domain.entries import (
    CompactionEntry,
    CustomEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from duragent.domain.messages import (
    AssistantMessage,
    CustomMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    text_of,
    user_text,
)
from duragent.domain.transcript import MISSING_RESULT_TEXT, llm_transcript, repair_pairing

pytestmark = pytest.mark.fast


def call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="bash", arguments={"command": "true"})


def result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="bash", content=[TextContent(text="ok")], timestamp=0
    )


def assistant(*calls: ToolCall) -> AssistantMessage:
    return AssistantMessage(content=list(calls), stop_reason="toolUse", timestamp=0)


def test_missing_results_are_filled_in_and_orphans_dropped() -> None:
    repaired = repair_pairing(
        [
            user_text("go", 0),
            assistant(call("a"), call("b")),
            result("b"),
            result("zzz"),  # answers nothing
            user_text("steer", 0),
            result("a"),  # arrived after the steer: moved up next to its call
        ]
    )
    assert [type(m).__name__ for m in repaired] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "UserMessage",
    ]
    first, second = repaired[2], repaired[3]
    assert isinstance(first, ToolResultMessage) and first.tool_call_id == "a"
    assert isinstance(second, ToolResultMessage) and second.tool_call_id == "b"


def test_an_interrupted_call_gets_an_error_result() -> None:
    repaired = repair_pairing([user_text("go", 0), assistant(call("a"))])
    last = repaired[-1]
    assert isinstance(last, ToolResultMessage) and last.is_error
    assert text_of(last.content) == MISSING_RESULT_TEXT


def test_custom_messages_reach_the_model_only_when_asked() -> None:
    hidden = CustomMessage(
        custom_type="note", content=[TextContent(text="x")], send_to_model=False, timestamp=0
    )
    shown = CustomMessage(custom_type="hint", content=[TextContent(text="y")], timestamp=0)
    out = llm_transcript([user_text("go", 0), hidden, shown])
    assert [text_of(m.content) for m in out if isinstance(m, UserMessage)] == ["go", "y"]


def msg(entry_id: str, parent: str | None, text: str) -> MessageEntry:
    return MessageEntry(id=entry_id, parent_id=parent, timestamp=0, message=user_text(text, 0))


def test_build_context_applies_the_latest_compaction_and_config_entries() -> None:
    path: list[SessionEntry] = [
        msg("1", None, "one"),
        ModelChangeEntry(id="2", parent_id="1", timestamp=0, model="claude-b"),
        msg("3", "2", "three"),
        msg("4", "3", "four"),
        CompactionEntry(
            id="5", parent_id="4", timestamp=0, summary="earlier work", first_kept_entry_id="4"
        ),
        ThinkingLevelChangeEntry(id="6", parent_id="5", timestamp=0, thinking_level="high"),
        CustomEntry(id="7", parent_id="6", timestamp=0, custom_type="state"),
        msg("8", "7", "eight"),
    ]
    context = build_context(path, SessionConfig(model="claude-a"))
    assert context.model == "claude-b" and context.thinking_level == "high"
    texts = [text_of(m.content) for m in context.messages]
    assert texts[0].endswith("earlier work")
    assert texts[1:] == ["four", "eight"]
