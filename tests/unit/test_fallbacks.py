"""What the model reads in place of a message a turn never staged."""

from __future__ import annotations

import asyncio

import pytest

from duragent.domain.fallbacks import (
    ABORT_NOTE,
    Skipped,
    abort_marker,
    error_reply,
    result_fallback,
)
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.domain.tools import ToolCallRef
from duragent.domain.turn_in_progress import TurnInProgress
from duragent.domain.turns import ProviderFailure, ToolCallOutcome

pytestmark = pytest.mark.fast

T = 1_700_000_000_000


def call(call_id: str, name: str = "bash") -> ToolCallRef:
    return ToolCallRef(id=call_id, name=name, args_preview="ls")


def outcome() -> ToolCallOutcome:
    return ToolCallOutcome(is_error=False, preview="ok", content_chars=2, duration_ms=1)


def test_a_finished_call_keeps_its_own_result() -> None:
    assert result_fallback(call("c1"), outcome(), T) is None


def test_a_skipped_call_says_it_did_not_run() -> None:
    result = result_fallback(call("c1"), Skipped(), T)
    assert result is not None and result.is_error
    assert result.tool_call_id == "c1" and result.tool_name == "bash"
    assert text_of(result.content).startswith("Not run: the user sent guidance")


def test_a_call_stopped_by_guidance_says_so() -> None:
    result = result_fallback(call("c1"), asyncio.CancelledError(), T)
    assert result is not None and text_of(result.content).startswith("Stopped because")


def test_a_failed_call_names_the_innermost_cause() -> None:
    try:
        try:
            raise OSError("disk full")
        except OSError as inner:
            raise RuntimeError("activity failed") from inner
    except RuntimeError as err:
        result = result_fallback(call("c1"), err, T)
    assert result is not None and result.is_error
    assert text_of(result.content) == "The tool call failed: disk full"


def test_a_finished_turn_has_one_result_per_call_in_call_order() -> None:
    turn = TurnInProgress("a1", [call("c1"), call("c2")], ["r1", "r2"])
    slots = turn.finished_slots([outcome(), Skipped()], T)
    assert [s.entry_id for s in slots] == ["a1", "r1", "r2"]
    assert slots[0].fallback is None and slots[1].fallback is None
    assert slots[2].fallback is not None
    assert turn.result_id("c2") == "r2"


def test_an_aborted_turn_saves_an_aborted_reply_and_every_result() -> None:
    turn = TurnInProgress("a1", [call("c1")], ["r1"])
    assistant, result = turn.aborted_slots(T)
    assert assistant.entry_id == "a1" and assistant.fallback is not None
    assert assistant.fallback.model_dump()["stop_reason"] == "aborted"
    assert isinstance(result.fallback, ToolResultMessage) and result.fallback.is_error
    assert text_of(result.fallback.content) == "Aborted by the user before it finished."
    assert TurnInProgress("a2").aborted_slots(T)[0].entry_id == "a2"


def test_a_replanned_call_is_not_an_error_and_asks_for_a_new_plan() -> None:
    turn = TurnInProgress("a1", [call("c1")], ["r1"])
    assistant, result = turn.replanned_slots(T)
    assert assistant.fallback is None
    assert isinstance(result.fallback, ToolResultMessage) and not result.fallback.is_error
    assert result.fallback.details == {"runtime_guidance_replan": True}
    assert "Re-plan with the guidance in mind." in text_of(result.fallback.content)


def test_a_failed_model_call_becomes_an_error_reply() -> None:
    failure = ProviderFailure(kind="other", status=500, message="boom", retryable=False)
    reply = error_reply(failure, "claude-x", T)
    assert (reply.stop_reason, reply.error_message, reply.model) == ("error", "boom", "claude-x")


def test_the_abort_marker_tells_the_model_what_happened() -> None:
    marker = abort_marker("m1", T)
    assert marker.id == "m1" and marker.custom_type == "abort"
    assert text_of(marker.content) == ABORT_NOTE
