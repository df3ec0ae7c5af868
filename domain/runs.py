"""A run: one prompt (or skill, or template) until agent_end, as one workflow execution."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from domain.messages import AgentMessage, Usage

RunStatus = Literal["running", "completed", "error", "aborted"]
Phase = Literal["idle", "turn", "compaction", "branch_summary", "retry"]
RunKind = Literal["prompt", "skill", "template"]


def session_workflow_id(session_id: str) -> str:
    """The one workflow id every structural operation of a session runs under.

    Temporal refuses to start a second open workflow with the same id, which is what
    makes "structural operations require idle" hold across clients and machines.
    """
    return f"session-{session_id}"


class RunOptions(BaseModel):
    """Timeouts and limits of one run; part of the run's input so they can be read in history."""

    model_config = ConfigDict(extra="forbid")

    model_heartbeat_timeout_s: float = 10.0
    """A model call whose worker stops heartbeating this long is retried elsewhere."""
    tool_heartbeat_timeout_s: float = 10.0
    model_timeout_s: float = 600.0
    tool_timeout_s: float = 1800.0
    provider_retries: int = 6
    """Retryable provider failures (429, 529, 5xx, network) per turn before the run fails."""
    provider_backoff_s: float = 2.0
    """First backoff when the provider gives no retry-after; doubles each attempt."""


class RunInput(BaseModel):
    """What starts a run. The prompt is new content: it enters history once, here."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    prompt: list[AgentMessage]
    kind: RunKind = "prompt"
    options: RunOptions = Field(default_factory=RunOptions)
    max_turns: int | None = None
    """Stop (status completed, stop reason noted) after this many turns; None: no limit."""


class RunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    status: RunStatus
    turns: int
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    leaf_id: str | None = None
    final_text: str = ""
    """The last assistant message's text, for callers that want the answer."""
