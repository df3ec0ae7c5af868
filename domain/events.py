"""Run events: the story of a run as clients see it, in order, with a resumable cursor.

The ten agent events of docs/SPEC.md (agent_start ... agent_end) plus the harness's own
(save points, retries, phase changes, queue activity). Streaming deltas travel as
`message_update` events through the store, never through workflow history.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from duragent.domain.messages import AgentMessage, StopReason, ToolResultMessage, Usage
from duragent.domain.tools import ToolResult


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentStart(_Event):
    type: Literal["agent_start"] = "agent_start"
    run_id: str


class AgentEnd(_Event):
    type: Literal["agent_end"] = "agent_end"
    run_id: str
    status: str
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None


class TurnStart(_Event):
    type: Literal["turn_start"] = "turn_start"
    turn: int


class TurnEnd(_Event):
    type: Literal["turn_end"] = "turn_end"
    turn: int
    assistant_entry_id: str | None
    tool_result_entry_ids: list[str] = Field(default_factory=list)
    stop_reason: StopReason | None = None


class MessageStart(_Event):
    """A message begins. For an assistant message it comes again, with the same
    `entry_id`, when the model call is made again (after a crash, or after a provider
    failure announced by `retry_scheduled`): a client then drops what it showed of it."""

    type: Literal["message_start"] = "message_start"
    entry_id: str
    message: AgentMessage


DeltaKind = Literal["text", "thinking", "toolCall"]


class MessageUpdate(_Event):
    """A streamed piece of the assistant message being generated."""

    type: Literal["message_update"] = "message_update"
    entry_id: str
    attempt: int = 1
    content_index: int
    kind: DeltaKind
    delta: str
    tool_name: str | None = None


class MessageEnd(_Event):
    type: Literal["message_end"] = "message_end"
    entry_id: str
    message: AgentMessage


class ToolExecutionStart(_Event):
    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    attempt: int = 1
    host: str | None = None
    """The host the call runs on (`domain.hosts`)."""


class ToolExecutionUpdate(_Event):
    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    partial: str


class ToolExecutionEnd(_Event):
    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolResult
    duration_ms: int
    attempt: int = 1


def tool_call_ended(
    entry_id: str,
    result: ToolResult,
    message: ToolResultMessage,
    duration_ms: int,
    attempt: int = 1,
) -> list[RunEventPayload]:
    """The events of a tool call whose result is `message`, staged at `entry_id`: the
    call's end, then its result message (what the tool activity and a sub-agent's call
    both emit)."""
    return [
        ToolExecutionEnd(
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            result=result,
            duration_ms=duration_ms,
            attempt=attempt,
        ),
        MessageStart(entry_id=entry_id, message=message),
        MessageEnd(entry_id=entry_id, message=message),
    ]


class SavePoint(_Event):
    """A turn and its tool results are stored; pending writes are flushed after them."""

    type: Literal["save_point"] = "save_point"
    turn: int
    leaf_id: str
    entries_committed: int
    pending_writes_flushed: int = 0


class RetryScheduled(_Event):
    """A retryable provider failure; the run backs off and calls the model again."""

    type: Literal["retry_scheduled"] = "retry_scheduled"
    turn: int
    attempt: int
    delay_ms: int
    error: str


class QueueConsumed(_Event):
    """A steering or follow-up message reached the model, in this turn."""

    type: Literal["queue_consumed"] = "queue_consumed"
    queue: Literal["steering", "follow_up", "next_turn"]
    entry_id: str
    turn: int


class RunAborted(_Event):
    """The run was aborted; these queued messages were dropped and returned to the caller."""

    type: Literal["run_aborted"] = "run_aborted"
    turn: int
    cleared_steering: list[str] = Field(default_factory=list)
    cleared_follow_ups: list[str] = Field(default_factory=list)


class RuntimeGuidanceInjected(_Event):
    """Guidance reached the model at one of the injection points (docs/SPEC.md)."""

    type: Literal["runtime_guidance_injected"] = "runtime_guidance_injected"
    point: str
    turn: int
    item_ids: list[str]
    interrupted: list[str] = Field(default_factory=list)
    """Tool calls cancelled for it (their output so far kept)."""
    skipped: list[str] = Field(default_factory=list)
    """Tool calls of the batch that never ran."""


class RuntimeGuidanceReplanBeforeTools(_Event):
    """Guidance arrived after the model planned tools and before any started: none ran."""

    type: Literal["runtime_guidance_replan_before_tools"] = "runtime_guidance_replan_before_tools"
    turn: int
    item_ids: list[str]
    skipped: list[str]


class CompactionStarted(_Event):
    type: Literal["compaction_start"] = "compaction_start"
    reason: str
    """manual, auto (the context neared the window) or overflow (the provider refused it)."""
    tokens_before: int


class CompactionEnded(_Event):
    type: Literal["compaction_end"] = "compaction_end"
    entry_id: str
    tokens_before: int
    summary_chars: int
    first_kept_entry_id: str


class BranchSummarized(_Event):
    type: Literal["branch_summary"] = "branch_summary"
    entry_id: str
    from_entry_id: str
    summary_chars: int


class ContinuedAsNew(_Event):
    """The run's workflow continued as a new execution (same run, fresh history)."""

    type: Literal["continued_as_new"] = "continued_as_new"
    turn: int
    history_events: int
    history_bytes: int


class ApprovalRequested(_Event):
    """A tool call waits for a person's decision (docs/SPEC.md, tool approval)."""

    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    tool_name: str
    args_preview: str
    """The call's arguments, shortened; the full ones are in the staged assistant message."""
    turn: int
    assistant_entry_id: str
    rule: str
    """What asked for the approval: a rule of the policy, or its default."""
    timeout_s: float | None = None


class ApprovalDecided(_Event):
    """A waiting call was decided: approved (once or always), denied, timed out, or
    withdrawn (the run was aborted or guidance interrupted the batch while it waited)."""

    type: Literal["approval_decided"] = "approval_decided"
    call_id: str
    decision: Literal["approve", "always", "deny", "timeout", "withdrawn"]
    reason: str | None = None
    by: str | None = None


class QuestionAsked(_Event):
    """An `ask_user` call waits for the user's answer (docs/SPEC.md, asking the user)."""

    type: Literal["question_asked"] = "question_asked"
    call_id: str
    question: str
    choices: list[str] | None = None
    allow_other: bool = True
    turn: int
    assistant_entry_id: str
    timeout_s: float | None = None


class QuestionAnswered(_Event):
    """A waiting question ended: answered, timed out, or withdrawn (the run was aborted or
    guidance interrupted the batch while it waited)."""

    type: Literal["question_answered"] = "question_answered"
    call_id: str
    status: Literal["answered", "timeout", "withdrawn"]
    answer: str | None = None
    by: str | None = None


class BudgetReached(_Event):
    """A limit of the run's or session's budget was reached at a save point: the run
    stops there (`stopped`) or waits for a raise."""

    type: Literal["budget_reached"] = "budget_reached"
    scope: str
    limit: str
    allowed: float
    spent: float
    stopped: bool
    message: str


class BudgetRaised(_Event):
    """A person raised the budget a run waited on; it goes on."""

    type: Literal["budget_raised"] = "budget_raised"
    scope: str
    budget: dict[str, Any]
    by: str | None = None


class PhaseChanged(_Event):
    type: Literal["phase_changed"] = "phase_changed"
    phase: str


class HostWaiting(_Event):
    """A tool call waits for its session's host (`waiting`), or the host is back."""

    type: Literal["host_waiting"] = "host_waiting"
    host: str
    tool_call_id: str
    waiting: bool


class SubagentStarted(_Event):
    """A `delegate` call's sub-agent session exists and its run is starting: a client can
    open it (its own events, steering and abort go by `session_id`)."""

    type: Literal["subagent_started"] = "subagent_started"
    tool_call_id: str
    session_id: str
    name: str


AgentEvent = Annotated[
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd,
    Field(discriminator="type"),
]

HarnessEvent = Annotated[
    SavePoint
    | RetryScheduled
    | PhaseChanged
    | QueueConsumed
    | RunAborted
    | RuntimeGuidanceInjected
    | RuntimeGuidanceReplanBeforeTools
    | CompactionStarted
    | CompactionEnded
    | BranchSummarized
    | ContinuedAsNew
    | ApprovalRequested
    | ApprovalDecided
    | QuestionAsked
    | QuestionAnswered
    | SubagentStarted
    | HostWaiting
    | BudgetReached
    | BudgetRaised,
    Field(discriminator="type"),
]

RunEventPayload = Annotated[
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | SavePoint
    | RetryScheduled
    | PhaseChanged
    | QueueConsumed
    | RunAborted
    | RuntimeGuidanceInjected
    | RuntimeGuidanceReplanBeforeTools
    | CompactionStarted
    | CompactionEnded
    | BranchSummarized
    | ContinuedAsNew
    | ApprovalRequested
    | ApprovalDecided
    | QuestionAsked
    | QuestionAnswered
    | SubagentStarted
    | HostWaiting
    | BudgetReached
    | BudgetRaised,
    Field(discriminator="type"),
]

run_event_adapter: TypeAdapter[RunEventPayload] = TypeAdapter(RunEventPayload)


def parse_event(payload: dict[str, Any]) -> RunEventPayload:
    return run_event_adapter.validate_python(payload)
