"""The turn the loop is in (`TurnInProgress`): the ids its messages get once saved, and
the save point's slots for it however it ends: finished, re-planned, or aborted (with
stand-ins, `domain.fallbacks`, for whatever was not staged).

Workflow state (`workflows.run_state.RunState.current`), pure and deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from duragent.domain.fallbacks import (
    ABORTED_TOOL_TEXT,
    ToolRun,
    replanned_result,
    result_fallback,
    tool_error,
)
from duragent.domain.messages import AssistantMessage
from duragent.domain.save_points import CommitSlot
from duragent.domain.tools import ToolCallRef


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
    rescheduled, finding what that attempt did (`TurnResult.calls_may_have_begun`)."""

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
