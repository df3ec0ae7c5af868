"""What the history reader makes of a workflow execution: a timeline of readable items."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Where a timeline with no items starts (they sort first)."""


class TimelineItem(BaseModel):
    """One thing that happened in a run, as one readable line plus its details."""

    at: datetime
    """When it happened (server time; for activities, when they were scheduled)."""
    kind: str
    """run_started, start_run, model_call, save_point, tool_call, retry, signal, cancel,
    finish_run, run_ended, continued_as_new, timer, apply_changes, workflow_task,
    subagent (a `delegate` call's child workflow), local_activity, activity, marker or
    event (anything else in the history)."""
    turn: int | None = None
    """The run's turn it belongs to (a save point: the turn whose model call carried it)."""
    summary: str
    """One line for people."""
    details: dict[str, Any] = Field(default_factory=dict)
    """What the summary is made of, JSON-safe (times as ISO 8601 strings)."""
    duration_ms: int | None = None
    """How long the run waited for it: scheduled to closed for activities (for a turn's
    activity, its model call; `turn_ms` in its details is the whole turn), the wait for
    retries and timers. None when unknown or not finished."""


class RunTimeline(BaseModel):
    """The timeline of one workflow execution (one Temporal run) of a session."""

    workflow_id: str
    temporal_run_id: str
    workflow_type: str
    run_id: str | None
    """Our run id (`RunInput.run_id`); inherited along a continue-as-new chain by
    `session_timelines`. None for executions that are not runs (session changes)."""
    items: list[TimelineItem]
    web_ui_url: str | None = None
    """This execution's history page in the Temporal web UI, when its address is known."""
    parent_session_id: str | None = None
    """For a sub-agent's run: the session whose `delegate` call started it."""
    parent_tool_call_id: str | None = None
    """For a sub-agent's run: that call."""
