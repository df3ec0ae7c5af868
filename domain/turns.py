"""The contracts between the workflow and its activities, one pair per step.

Inputs carry references (session id, leaf id, entry ids, snapshot id) and results carry
only what is new and small (ids, usage, previews, tool call refs). Full messages move
through the store, so workflow history grows with new content alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from duragent.domain.approvals import ApprovalPolicy
from duragent.domain.changes import SessionChange
from duragent.domain.compact import CompactModel
from duragent.domain.config import SessionConfig, SnapshotRef
from duragent.domain.cost import TurnCost
from duragent.domain.entries import SessionEntry
from duragent.domain.events import RunEventPayload
from duragent.domain.guidance import GuidanceItem
from duragent.domain.hooks import NextTurn
from duragent.domain.messages import AgentMessage, StopReason, ToolResultMessage, Usage, text_of
from duragent.domain.queues import QueuedMessage
from duragent.domain.runs import Invocation, Phase, RunKind, RunStatus
from duragent.domain.save_points import TurnCommit
from duragent.domain.tools import ToolCallRef, ToolResult

START_RUN = "start_run"
TAKE_TURN = "take_turn"
"""A turn as one activity: the model's reply (`TurnInput`), then its tool calls (`TurnResult`)."""
MODEL_TURN = "model_turn"
"""A turn's model call alone (`TurnInput` to `ModelReply`), its tool calls then activities of
their own: in runs from before `take_turn`, when the session's host did not take the turn in
time, and when a worker of an older build did (`workflows.turn_activity`)."""
RUN_TOOL = "run_tool"
FINISH_RUN = "finish_run"
RECORD_EVENTS = "record_events"
APPLY_CHANGES = "apply_changes"
TAKE_GUIDANCE = "take_guidance"
QUEUE_INPUT = "queue_input"

OUTCOME_PREVIEW_CHARS = 200
"""How much of a tool result the workflow sees."""


class _Contract(CompactModel):
    model_config = ConfigDict(extra="forbid")


class StartRunInput(_Contract):
    session_id: str
    run_id: str
    workflow_id: str
    kind: RunKind
    prompt: list[AgentMessage]
    invocation: Invocation | None = None
    """A skill or template, resolved from the first snapshot into the prompt."""
    prompt_entry_ids: list[str]
    """Entry ids for the prompt messages, chosen in the workflow."""
    timestamp: int = 0
    """When the run started (workflow time), for messages made from a skill or template."""


NOTHING_QUEUED = "NothingQueued"
"""The failure type of a queued run's start when its input was taken back meanwhile."""


class QueueInputInput(_Contract):
    """Input that reached a run after its end was stored, for the next run; or, with
    `cancel_waiting`, the session's waiting input cancelled (a stop came then)."""

    session_id: str
    items: list[QueuedMessage]
    cancel_waiting: bool = False


class StartRunResult(_Contract):
    leaf_id: str
    snapshot: SnapshotRef
    config: SessionConfig | None = None
    """The session's harness config at the start (queue modes, for getters)."""
    workflow_hooks: list[str] = Field(default_factory=list)
    """Import paths of the worker's workflow hooks (see `domain.hooks`)."""
    host: str | None = None
    """The session's host, where the run's tool calls go; None: the shared task queue."""


class TurnInput(_Contract):
    """A turn, for either of its activities (`TAKE_TURN`, `MODEL_TURN`): save the previous
    turn (if `commit`), then call the model on the committed context.

    The save point runs at the start of the next model call instead of as a step of its
    own: it is the same transaction either way, and the turn saves a round trip.
    """

    session_id: str
    run_id: str
    turn: int
    leaf_id: str
    """The committed leaf before `commit`: the context is the path from the root to here."""
    entry_id: str
    """Where the assistant message is staged."""
    snapshot: SnapshotRef
    """The snapshot of the previous turn; `commit` may replace it with a newer one."""
    commit: TurnCommit | None = None
    """The previous turn, saved below `leaf_id` before the call."""
    override: NextTurn | None = None
    """Model or thinking level for this turn only (a workflow hook's prepare_next_turn)."""
    deps: JsonValue = None
    """The run's dependencies (`RunInput.deps`), for the tool calls the turn runs."""


ProviderErrorKind = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "network",
    "timeout",
    "bad_request",
    "auth",
    "permission",
    "not_found",
    "context_overflow",
    "other",
]


class ProviderFailure(_Contract):
    """A model call that failed at the provider; carried as the activity error's details."""

    kind: ProviderErrorKind
    status: int | None
    message: str
    retryable: bool
    retry_after_ms: int | None = None


PROVIDER_ERROR = "ProviderError"
"""The type of the activity error that carries a `ProviderFailure` as its details."""

WORKER_LOST = "WorkerLost"
"""The type of the (retryable) error a call fails with when its worker's lease lapsed
(`activities.leases`): its next attempt starts at once."""


class ModelReply(_Contract):
    """What the workflow learns of the model's reply (the reply itself is staged in the
    store): why it stopped, its usage and cost, a preview, and the calls it asks for."""

    stop_reason: StopReason
    usage: Usage
    text_preview: str
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    snapshot: SnapshotRef | None = None
    """Set when the call ran with a newer snapshot than the input's (config changed)."""
    approval_policy: ApprovalPolicy | None = None
    """The turn's approval policy, set only when a call waits for approval: what an
    "always" decision adds its rule to."""
    model: str | None = None
    """The model that wrote the reply, for the worker's metrics (the workflow reads none)."""
    cost: TurnCost | None = None
    """The turn's cost at the worker's price table, so the workflow never reads prices;
    None from workers that did not price turns."""


class ToolCallInput(_Contract):
    session_id: str
    run_id: str
    turn: int
    assistant_entry_id: str
    """The staged assistant message holding the call's full arguments."""
    result_entry_id: str
    call: ToolCallRef
    rescheduled: int = 0
    """Earlier activities of this call that its host's worker never took (it was gone):
    one of them may have started before the host went, so this is no first attempt."""
    deps: JsonValue = None
    """The run's dependencies (`RunInput.deps`): the call's `ToolContext.deps`."""


class ToolCallOutcome(_Contract):
    is_error: bool
    terminate: bool = False
    interrupted: bool = False
    """The call was cut short (worker crash, abort); the result says what is known."""
    preview: str
    content_chars: int
    duration_ms: int

    @classmethod
    def of(
        cls,
        result: ToolResult,
        message: ToolResultMessage,
        duration_ms: int,
        *,
        interrupted: bool = False,
    ) -> ToolCallOutcome:
        """What the workflow learns of a finished call whose result is `message`."""
        text = text_of(message.content)
        return cls(
            is_error=result.is_error,
            terminate=result.terminate,
            interrupted=interrupted,
            preview=text[:OUTCOME_PREVIEW_CHARS],
            content_chars=len(text),
            duration_ms=duration_ms,
        )


class TurnResult(_Contract):
    """A turn taken in one activity (`TAKE_TURN`): the reply, and the tool calls it ran.
    Calls the workflow must decide on (an approval, a `delegate`) are left to it, all of
    them: `ran_tools` is False and it runs the batch."""

    reply: ModelReply
    outcomes: list[ToolCallOutcome | None] = Field(default_factory=list)
    """One per call of the reply, in call order, when the activity ran them (else empty);
    None: a call guidance kept from starting."""
    interrupted: list[str] = Field(default_factory=list)
    """Ids of calls guidance stopped while they ran."""
    skipped: list[str] = Field(default_factory=list)
    """Ids of calls guidance kept from starting."""
    guidance: list[GuidanceItem] = Field(default_factory=list)
    """Guidance the activity took from the store (compare-and-set), for the workflow to
    inject; `replanned` when it came before any call started."""
    replanned: bool = False
    model_ms: int = 0
    """How long the model call took (its metrics; the workflow reads none)."""
    calls_may_have_begun: bool = False
    """Set by the workflow, never by the activity: the turn's activity was lost after it
    may have started the calls (its worker gone, the retry not taken in time), so the
    workflow's own run of them looks for what that attempt did first."""

    @property
    def ran_tools(self) -> bool:
        return bool(self.outcomes)


class FinishRunInput(_Contract):
    session_id: str
    run_id: str
    kind: RunKind = "prompt"
    """Recorded with the run if its start never was (it was stopped first)."""
    status: RunStatus
    turns: int
    usage: Usage
    error: str | None = None
    parent_id: str
    commits: list[TurnCommit] = Field(default_factory=list)
    """Turns still to save below `parent_id`, in order (the last one; after an abort, the
    interrupted one too)."""
    entries: list[SessionEntry] = Field(default_factory=list)
    """Pending writes still unflushed when the run ended, flushed after the commits."""
    session_config: SessionConfig | None = None
    """Session-wide config set since the last save point."""
    leftover: list[QueuedMessage] = Field(default_factory=list)
    """Queued messages the run never consumed; they start the session's next run."""
    last_assistant_entry_id: str | None = None
    compaction_id: str | None = None
    """An aborted run's compaction that was under way: if its summary was stored, it is
    the leaf the commits go below, and its model call counts in the run's usage."""


class FinishRunResult(_Contract):
    leaf_id: str
    final_text: str
    usage: Usage | None = None
    """The run's usage as stored: what the workflow counted plus the replies it never
    got (`CommitSlot.uncounted`). None from workers that did not report it."""
    cancelled_inputs: list[str] = Field(default_factory=list)
    """Input-queue items cancelled because the run was stopped (their text)."""
    queued_input: bool = False
    """Input sent while the run was open waits in the queue: the next run starts for it."""


class RecordEventsInput(_Contract):
    session_id: str
    run_id: str
    key: str
    """Dedup key prefix: recording the same step twice stores its events once."""
    events: list[RunEventPayload]
    phase: Phase | None = None


class ApplyChangesInput(_Contract):
    session_id: str
    changes: list[SessionChange]


class TakeGuidanceInput(_Contract):
    """Consume these guidance items for the run, if they are still pending (compare-and-set):
    an item edited or deleted since it was sent is not taken."""

    session_id: str
    run_id: str
    item_ids: list[str]


class TakeGuidanceResult(_Contract):
    taken: list[str]
    """The ids taken, in the order given; the others are no longer pending."""
