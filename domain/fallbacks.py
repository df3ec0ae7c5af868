"""Stand-in messages: what a turn's transcript says where no message was staged.

Every tool call gets a result and every turn an assistant message, even when the call
never ran, was stopped, failed for good, or the run was aborted; the model then reads
what happened instead of a gap. These are the texts it reads.
"""

from __future__ import annotations

import asyncio

from duragent.domain.entries import CustomMessageEntry
from duragent.domain.messages import AssistantMessage, TextContent, ToolResultMessage
from duragent.domain.models import stored_model_ref
from duragent.domain.tools import ToolCallRef
from duragent.domain.turns import ProviderFailure, ToolCallOutcome

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
    """The assistant message of a turn whose model call failed for good: stamped with the
    provider, API and model id of `model` (the session's name of it), as a reply is."""
    ref = stored_model_ref(model)
    return AssistantMessage(
        api=ref.api,
        provider=ref.provider,
        model=ref.model,
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
