"""Stand-in messages: what a turn's transcript says where no message was staged.

Every tool call gets a result and every turn an assistant message, even when the call
never ran, was stopped, failed for good, or the run was aborted; the model then reads
what happened instead of a gap. These are the texts it reads.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from duragent.domain.entries import CustomMessageEntry
from duragent.domain.messages import AssistantMessage, TextContent, ToolResultMessage
from duragent.domain.tools import ToolCallRef
from duragent.domain.turns import CommitSlot, ProviderFailure, ToolCallOutcome

ABORT_NOTE = (
    "The user aborted the run here. Tool calls that had not finished were stopped; "
    "their results say so. Do not assume they completed."
)
SKIPPED_TEXT = "Not run: the user sent guidance while earlier calls of this turn ran."
STOPPED_TEXT = "Stopped because the user sent guidance while it ran."
REPLANNED_TEXT = (
    "Not run: the user sent guidance before this call started. Re-plan with the guidance in mind."
)
ABORTED_TOOL_TEXT = "Aborted by the user before it finished."


class Skipped:
    """A call that never started: guidance arrived before its group's turn."""


ToolRun = ToolCallOutcome | BaseException | Skipped
"""How one tool call of a batch ended: its outcome, the error it failed with, or skipped."""


@dataclass
class TurnInProgress:
    """The turn the loop is in: the ids its messages will have once saved. An abort
    saves it with stand-ins for whatever was not staged yet."""

    assistant_id: str
    calls: list[ToolCallRef] = field(default_factory=list)
    result_ids: list[str] = field(default_factory=list)
    """One per call: the id its tool result gets."""
    replied: bool = False
    """The model call returned: the workflow has counted its reply's usage."""
    calls_may_have_begun: bool = False
    """A lost attempt of the turn's activity may have started the calls: each is run as
    rescheduled, finding what that attempt did (`TakeTurnResult.calls_may_have_begun`)."""

    def result_id(self, call_id: str) -> str:
        return dict(zip([call.id for call in self.calls], self.result_ids, strict=True))[call_id]

    def aborted_slots(self, timestamp: int) -> list[CommitSlot]:
        aborted = AssistantMessage(
            stop_reason="aborted", error_message="aborted by the user", timestamp=timestamp
        )
        return [
            CommitSlot(entry_id=self.assistant_id, fallback=aborted, uncounted=not self.replied),
            *(
                CommitSlot(
                    entry_id=result_id, fallback=tool_error(call, ABORTED_TOOL_TEXT, timestamp)
                )
                for call, result_id in zip(self.calls, self.result_ids, strict=True)
            ),
        ]

    def replanned_slots(self, timestamp: int) -> list[CommitSlot]:
        """The before_tools injection point: every planned call answered as not run."""
        return [
            CommitSlot(entry_id=self.assistant_id),
            *(
                CommitSlot(entry_id=result_id, fallback=replanned_result(call, timestamp))
                for call, result_id in zip(self.calls, self.result_ids, strict=True)
            ),
        ]

    def finished_slots(self, outcomes: list[ToolRun], timestamp: int) -> list[CommitSlot]:
        """The assistant message, then one result per call in call order; a call that did
        not give an outcome gets a result saying why."""
        slots = [CommitSlot(entry_id=self.assistant_id)]
        for call, result_id, outcome in zip(self.calls, self.result_ids, outcomes, strict=True):
            slots.append(
                CommitSlot(entry_id=result_id, fallback=result_fallback(call, outcome, timestamp))
            )
        return slots


def result_fallback(
    call: ToolCallRef, outcome: ToolRun, timestamp: int
) -> ToolResultMessage | None:
    """The result to save for `call` when its activity staged none; None when it did."""
    if isinstance(outcome, ToolCallOutcome):
        return None
    if isinstance(outcome, Skipped):
        return tool_error(call, SKIPPED_TEXT, timestamp)
    if isinstance(outcome, asyncio.CancelledError):
        return tool_error(call, STOPPED_TEXT, timestamp)
    # The activity gave up (its retries are spent): the model still gets a result for
    # the call, saying what went wrong.
    return tool_error(call, f"The tool call failed: {root_message(outcome)}", timestamp)


def tool_error(call: ToolCallRef, text: str, timestamp: int) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=text)],
        is_error=True,
        timestamp=timestamp,
    )


def replanned_result(call: ToolCallRef, timestamp: int) -> ToolResultMessage:
    """Not an error: the call was held back on purpose, for the model to re-plan."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=[TextContent(text=REPLANNED_TEXT)],
        details={"runtime_guidance_replan": True},
        is_error=False,
        timestamp=timestamp,
    )


def error_reply(failure: ProviderFailure, model: str, timestamp: int) -> AssistantMessage:
    """The assistant message of a turn whose model call failed for good."""
    return AssistantMessage(
        model=model,
        provider="anthropic",
        stop_reason="error",
        error_message=failure.message,
        timestamp=timestamp,
    )


def abort_marker(entry_id: str, timestamp: int) -> CustomMessageEntry:
    """The note an aborted run leaves for the model, after what it saved."""
    return CustomMessageEntry(
        id=entry_id,
        parent_id=None,
        timestamp=timestamp,
        custom_type="abort",
        content=[TextContent(text=ABORT_NOTE)],
    )


def root_message(err: BaseException) -> str:
    """The innermost cause's text (an activity error wraps the tool's own)."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__
