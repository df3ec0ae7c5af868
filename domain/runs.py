"""A run: one prompt (or skill, or template) until agent_end, as one workflow execution."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from duragent.domain.budgets import Budget, BudgetCarried, BudgetView
from duragent.domain.compaction import CompactionSettings
from duragent.domain.config import SessionConfig, SnapshotRef
from duragent.domain.entries import SessionEntry
from duragent.domain.guidance import GuidanceItem
from duragent.domain.hooks import NextTurn
from duragent.domain.messages import AgentMessage, Usage
from duragent.domain.queues import QueuedMessage

RunStatus = Literal["running", "completed", "error", "aborted"]
Phase = Literal[
    "idle",
    "turn",
    "compaction",
    "branch_summary",
    "retry",
    "awaiting_approval",
    "awaiting_input",
    "awaiting_host",
    "awaiting_budget",
]
RunKind = Literal["prompt", "skill", "template", "queued"]
"""`queued`: a run started for the input sent while the previous run was open (it has no
prompt of its own: the queued input is its prompt)."""


class Invocation(BaseModel):
    """A skill or prompt template to run, resolved from the run's first turn snapshot."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["skill", "template"]
    name: str
    args: list[str] = Field(default_factory=list)


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
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    continue_as_new_after_turns: int = 300
    """Continue as new after this many turns in one execution (about 3,600 history
    events), or sooner when Temporal suggests it, at a quiet boundary."""
    host_wait_s: float = 600.0
    """How long a tool call waits for its session's host (DURAGENT_HOST_WAIT) before
    the run ends with an error."""
    host_check_s: float = 10.0
    """A tool call not taken by its host's worker this soon puts the run in the
    `awaiting_host` phase until a worker of that host answers."""
    ask_user_timeout_s: float | None = None
    """How long an `ask_user` question waits for its answer (DURAGENT_ASK_USER_TIMEOUT);
    None: as long as it takes. Unanswered in time, the call's result says so."""


class InboxState(BaseModel):
    """Queued steering and follow-ups, pending writes, latest config, guidance."""

    model_config = ConfigDict(extra="forbid")

    steering: list[QueuedMessage] = Field(default_factory=list)
    follow_ups: list[QueuedMessage] = Field(default_factory=list)
    pending_writes: list[SessionEntry] = Field(default_factory=list)
    config: SessionConfig | None = None
    session_config_changed: bool = False
    guidance: list[GuidanceItem] = Field(default_factory=list)
    arrivals: dict[str, str] = Field(default_factory=dict)
    seen: list[str] = Field(default_factory=list)
    """Recent message ids, so a resent message is still recognised after the move."""


class CarriedState(BaseModel):
    """What a run carries into its next execution when it continues as new."""

    model_config = ConfigDict(extra="forbid")

    turn: int
    leaf_id: str
    snapshot: SnapshotRef
    usage: Usage
    hooks: list[str] = Field(default_factory=list)
    override: NextTurn | None = None
    last_assistant_id: str | None = None
    executions: int = 1
    inbox: InboxState
    host: str | None = None
    """The host the run's tool calls go to (`domain.hosts`)."""
    budget: BudgetCarried | None = None
    """The run's budget keeping (domain.budgets), when it has a budget."""
    output_tries: int = 0
    """Outputs refused, or answers given without the output tool, so far
    (`workflows.output`)."""


class RunInput(BaseModel):
    """What starts a run. The prompt is new content: it enters history once, here."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    run_id: str
    prompt: list[AgentMessage] = Field(default_factory=list)
    """The user's messages; empty when `invocation` names a skill or template."""
    kind: RunKind = "prompt"
    invocation: Invocation | None = None
    """Set for skill and template runs (kind says which)."""
    options: RunOptions = Field(default_factory=RunOptions)
    max_turns: int | None = None
    """Stop (status completed, stop reason noted) after this many turns; None: no limit."""
    carried: CarriedState | None = None
    """Set when this execution continues the run from an earlier one."""
    budget: Budget | None = None
    """The run's own budget (domain.budgets); the session's, if any, applies as well."""
    deps: JsonValue = None
    """The run's dependencies (an agent's `deps_type`, in its JSON form): handed to each
    tool call as `ToolContext.deps`. They travel in the workflow's input and each turn's,
    so they are small, serializable values (ids, settings, addresses), not connections."""


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
    cleared_steering: list[str] = Field(default_factory=list)
    """On abort: steering messages that were queued and never delivered (their text)."""
    cleared_follow_ups: list[str] = Field(default_factory=list)
    cancelled_inputs: list[str] = Field(default_factory=list)
    """On abort: input-queue items of the session that were cancelled with the run."""
    cost_usd: float = 0.0
    """What the run's model calls cost (sub-agents' included), as the worker priced them."""
    unpriced_models: list[str] = Field(default_factory=list)
    """Models the worker has no price for: their calls are not in `cost_usd`."""
    output: JsonValue = None
    """The run's structured output (a session of an agent with an `output_type`), in
    its JSON form, as the client read it from the store; None otherwise."""


class RunView(BaseModel):
    """A running session as its workflow sees it (the `state` query)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    phase: Phase
    turn: int
    config: SessionConfig | None
    """The latest config: what getters return (changes apply from the next turn)."""
    steering: list[QueuedMessage] = Field(default_factory=list)
    follow_ups: list[QueuedMessage] = Field(default_factory=list)
    pending_writes: list[SessionEntry] = Field(default_factory=list)
    """Writes session reads may not show yet: those of a save point in progress, then
    those waiting for the next one."""
    guidance: list[GuidanceItem] = Field(default_factory=list)
    """Guidance waiting for the nearest safe point."""
    awaiting_host: str | None = None
    """The host the run waits for (phase `awaiting_host`): its tool calls wait for it."""
    budget: BudgetView | None = None
    """The run's budgets and spending, when it has a budget (domain.budgets)."""
