"""The save point's contracts: what a finished turn commits to the session tree.

A turn's messages are staged as its activities produce them (`store.staging`), under
entry ids the workflow fixed (the assistant's `workflow.uuid4()`, each tool result's
`result_entry_id`). The workflow names them in a `TurnCommit`, with a stand-in for each
that may never be staged (`CommitSlot.fallback`), and the save point
(`activities.save_point`) moves them into the tree in one transaction, with the pending
writes and the queued messages that start the next turn. docs/ARCHITECTURE.md, "The save
point", shows every piece.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import ConfigDict, Field

from duragent.domain.compact import CompactModel
from duragent.domain.config import SessionConfig
from duragent.domain.entries import SessionEntry
from duragent.domain.events import RunEventPayload
from duragent.domain.messages import AgentMessage, Usage


class _Contract(CompactModel):
    model_config = ConfigDict(extra="forbid")


class CommitSlot(_Contract):
    """A staged message to move into the tree, or `fallback` when nothing was staged."""

    entry_id: str
    fallback: AgentMessage | None = None
    uncounted: bool = False
    """The workflow never got this reply (its model call was stopped): its usage, if a
    reply was staged, is added to the run's when the slot is committed."""


class QueueConsumption(_Contract):
    entry_id: str
    queue: Literal["steering", "follow_up"]


class TurnCommit(_Contract):
    """A finished turn to save (a save point): its messages, then what queued up.

    Committed below the run's current leaf. Turn end, save point and (when the run
    `continues`) the next turn's start and its queued messages are emitted as events.
    """

    turn: int
    slots: list[CommitSlot]
    """The turn's own messages, in transcript order: assistant, then its tool results."""
    entries: list[SessionEntry] = Field(default_factory=list)
    """Appended after the slots, in order: pending writes, then queued messages."""
    usage: Usage
    """The run's usage so far, for its run state."""
    continues: bool = True
    """Another turn follows: take the next snapshot and emit its turn_start."""
    session_config: SessionConfig | None = None
    """Session-wide config set during the turn, stored before the next snapshot is taken."""
    consumed: list[QueueConsumption] = Field(default_factory=list)
    """Queued messages among `entries`, recorded as consumed by this turn."""
    events: list[RunEventPayload] = Field(default_factory=list)
    """More events to emit with the save point (guidance injections)."""

    def leaf_after(self, parent_id: str) -> str:
        """The session leaf once this is committed below `parent_id`."""
        if self.entries:
            return self.entries[-1].id
        if self.slots:
            return self.slots[-1].entry_id
        return parent_id


def result_entry_id(assistant_entry_id: str, call_id: str) -> str:
    """Where a tool call's result is staged: fixed by its turn's assistant entry and the
    call's id, so a retried turn, and an aborted one, finds what an attempt staged."""
    return uuid.uuid5(_RESULT_IDS, f"{assistant_entry_id}/{call_id}").hex


_RESULT_IDS = uuid.UUID("5f0c2a8e-4a51-4c56-9a57-2b7e1d0c9f31")
"""The namespace of `result_entry_id`s."""
