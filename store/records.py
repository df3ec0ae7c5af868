"""What the store hands out: plain pydantic records, detached from the database.

Each is read straight off its row (`Record.model_validate(row)`): the fields carry the
rows' column names, and pydantic turns the JSON columns into their models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from duragent.domain.config import SessionConfig
from duragent.domain.messages import AgentMessage, Usage
from duragent.domain.runs import Phase, RunStatus


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", from_attributes=True)


class SessionRecord(_Record):
    id: str
    name: str | None
    owner: str | None
    workspace: str
    config: SessionConfig
    leaf_id: str | None
    parent_session_id: str | None = None
    forked_from_entry_id: str | None = None
    created_at: int
    updated_at: int
    parent_run_id: str | None = None
    """A sub-agent's session: the parent session's run that started it."""
    parent_tool_call_id: str | None = None
    """A sub-agent's session: the parent's `delegate` call it answers."""
    host: str | None = None
    """The host its workspace is on (`domain.hosts`); None until its first run."""


class RunRecord(_Record):
    run_id: str
    session_id: str
    workflow_id: str
    kind: str
    status: RunStatus
    phase: Phase
    turns: int
    usage: Usage = Field(default_factory=Usage)
    error: str | None
    started_at: int
    updated_at: int
    ended_at: int | None


class StoredEvent(_Record):
    """A run event with its cursor (`seq`, numbered per session from 1): resume with
    `after=seq`."""

    seq: int
    session_id: str
    run_id: str | None
    type: str
    payload: dict[str, Any]
    created_at: int


class DisplayMessage(_Record):
    """A message as a UI shows it; `seq` numbers the session's messages from 1."""

    seq: int
    id: str
    session_id: str
    run_id: str | None
    role: str
    message: dict[str, Any] = Field(validation_alias=AliasChoices("message", "payload"))
    """The message as JSON (the row's `payload`)."""
    created_at: int


class QueueItem(_Record):
    """An input-queue item (see `store.input_queue`)."""

    id: str
    session_id: str
    kind: Literal["next_turn", "guidance"]
    status: Literal["pending", "consumed", "cancelled"]
    run_id: str | None
    text: str
    message: AgentMessage
    position: int
    created_at: int
    updated_at: int
    consumed_at: int | None
    starts_run: bool = False
    """Sent while a run was open: it starts the next run when that one ends."""


class TriggerRecord(_Record):
    """A trigger (`store.triggers`), without its secret: what lists and answers show."""

    id: str
    owner: str | None
    name: str
    session_id: str | None
    """The session its deliveries go to; None: a new session per delivery."""
    template: str
    created_at: int
    secret_set_at: int


class ScheduleRecord(_Record):
    """A schedule's row: whose it is and which session it prompts (`store.schedules`)."""

    id: str
    session_id: str
    owner: str | None
    created_at: int
