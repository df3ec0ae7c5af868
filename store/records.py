"""What the store hands out: plain pydantic records, detached from the database."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from domain.config import SessionConfig
from domain.messages import AgentMessage, Usage
from domain.runs import Phase, RunStatus


class SessionRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

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


class StoredEvent(BaseModel):
    """A run event with its cursor (`seq`, numbered per session from 1): resume with
    `after=seq`."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    session_id: str
    run_id: str | None
    type: str
    payload: dict[str, Any]
    created_at: int


class DisplayMessage(BaseModel):
    """A message as a UI shows it; `seq` numbers the session's messages from 1."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    id: str
    session_id: str
    run_id: str | None
    role: str
    message: dict[str, Any]
    created_at: int


class QueueItem(BaseModel):
    """An input-queue item (see `store.input_queue`)."""

    model_config = ConfigDict(extra="forbid")

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
