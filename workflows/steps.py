"""How the workflow calls its activities: names, timeouts, retry policies.

Bookkeeping steps (start, finish, events) are short store writes and run as local
activities: a marker in history instead of a task round trip through the server. The
save point of each turn rides on the next model call (see `TurnInput.commit`).
The model call and tool calls are regular activities: they run long, heartbeat so a
crashed worker is noticed, and are cancelled through heartbeats on abort.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar, cast

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutType,
)
from temporalio.exceptions import (
    TimeoutError as TemporalTimeout,
)
from temporalio.workflow import ActivityCancellationType

from duragent.workflows import patches

with workflow.unsafe.imports_passed_through():
    from duragent.domain import tree_ops as ops
    from duragent.domain.budgets import SESSION_SPEND, SessionSpendInput, Spent
    from duragent.domain.events import PhaseChanged, RetryScheduled, RunEventPayload
    from duragent.domain.fallbacks import root_message
    from duragent.domain.hosts import HOST_READY
    from duragent.domain.questions import STAGE_ANSWER, StageAnswerInput
    from duragent.domain.runs import RunOptions
    from duragent.domain.schedules import (
        DELIVER_SCHEDULED_PROMPT,
        DeliverScheduledPrompt,
        FiringOutcome,
    )
    from duragent.domain.subagents import (
        FINISH_SUBAGENT,
        START_SUBAGENT,
        FinishSubagentInput,
        StartSubagentInput,
        SubagentStart,
    )
    from duragent.domain.turns import (
        APPLY_CHANGES,
        FINISH_RUN,
        MODEL_TURN,
        QUEUE_INPUT,
        RECORD_EVENTS,
        RUN_TOOL,
        START_RUN,
        TAKE_GUIDANCE,
        TAKE_TURN,
        ApplyChangesInput,
        FinishRunInput,
        FinishRunResult,
        ModelReply,
        ProviderFailure,
        QueueInputInput,
        RecordEventsInput,
        StartRunInput,
        StartRunResult,
        TakeGuidanceInput,
        TakeGuidanceResult,
        ToolCallInput,
        ToolCallOutcome,
        TurnInput,
        TurnResult,
    )
    from duragent.domain.turns import PROVIDER_ERROR as PROVIDER_ERROR

T = TypeVar("T")

# Store writes retry until the database is back (a locked file, a restarted server).
_STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
)
_STORE_TIMEOUT = timedelta(seconds=30)
# A crashed worker's activity is noticed when its heartbeat times out; retry at once
# after that, so recovery takes the heartbeat timeout and little more.
ACTIVITY_RETRY_FIRST = timedelta(milliseconds=200)
_STORE_DEADLINE = timedelta(hours=1)


async def _store_step(name: str, data: BaseModel, result_type: type[T], summary: str) -> T:
    result = await workflow.execute_local_activity(
        name,
        data,
        result_type=result_type,
        start_to_close_timeout=_STORE_TIMEOUT,
        schedule_to_close_timeout=_STORE_DEADLINE,
        retry_policy=_STORE_RETRY,
        summary=summary,
    )
    return cast(T, result)


async def start_run(data: StartRunInput) -> StartRunResult:
    return await _store_step(START_RUN, data, StartRunResult, "start run")


async def finish_run(data: FinishRunInput) -> FinishRunResult:
    saves = ", ".join(f"turn {c.turn} ({len(c.slots)} message(s))" for c in data.commits)
    summary = f"finish run: {data.status}" + (f"; saves {saves}" if saves else "")
    return await _store_step(FINISH_RUN, data, FinishRunResult, summary)


async def apply_changes(data: ApplyChangesInput) -> None:
    await _store_step(APPLY_CHANGES, data, type(None), f"apply {len(data.changes)} change(s)")


async def take_guidance(data: TakeGuidanceInput) -> TakeGuidanceResult:
    summary = f"take {len(data.item_ids)} guidance item(s)"
    return await _store_step(TAKE_GUIDANCE, data, TakeGuidanceResult, summary)


async def queue_input(data: QueueInputInput) -> None:
    await _store_step(QUEUE_INPUT, data, type(None), f"queue {len(data.items)} late input(s)")


async def record_events(data: RecordEventsInput) -> None:
    summary = "; ".join(_describe(event) for event in data.events)
    await _store_step(RECORD_EVENTS, data, type(None), summary)


async def _long_step(
    name: str,
    data: BaseModel,
    result_type: type[T],
    *,
    activity_id: str,
    timeout_s: float,
    heartbeat_s: float,
    attempts: int,
    max_interval_s: float,
    summary: str,
    non_retryable: list[str] | None = None,
    task_queue: str | None = None,
    start_within_s: float | None = None,
) -> T:
    """A regular activity: it heartbeats, so a crashed worker is noticed, and an abort
    cancels it through its heartbeats and waits until it has stopped. Its retries start
    at once (see ACTIVITY_RETRY_FIRST) and back off to `max_interval_s`. On another
    `task_queue` (a host's) it may have to start within `start_within_s`."""
    result = await workflow.execute_activity(
        name,
        data,
        result_type=result_type,
        activity_id=activity_id,
        start_to_close_timeout=timedelta(seconds=timeout_s),
        heartbeat_timeout=timedelta(seconds=heartbeat_s),
        retry_policy=RetryPolicy(
            initial_interval=ACTIVITY_RETRY_FIRST,
            maximum_interval=timedelta(seconds=max_interval_s),
            maximum_attempts=attempts,
            non_retryable_error_types=non_retryable,
        ),
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        summary=summary,
        task_queue=task_queue,
        schedule_to_start_timeout=(
            timedelta(seconds=start_within_s) if start_within_s is not None else None
        ),
    )
    return cast(T, result)


async def model_turn(data: TurnInput, options: RunOptions, attempt: int) -> ModelReply:
    return await _long_step(
        MODEL_TURN,
        data,
        ModelReply,
        activity_id=f"turn-{data.turn}-model-{attempt}",
        timeout_s=options.model_timeout_s,
        heartbeat_s=options.model_heartbeat_timeout_s,
        # Provider failures come back to the workflow, which backs off in the `retry`
        # phase where clients can see it; Temporal retries only crashes and timeouts.
        attempts=5,
        max_interval_s=30,
        non_retryable=[PROVIDER_ERROR],
        summary=f"turn {data.turn}: "
        + (f"save turn {data.commit.turn}, then " if data.commit else "")
        + f"call {data.snapshot.model}",
    )


async def take_turn(
    data: TurnInput,
    options: RunOptions,
    attempt: int,
    *,
    task_queue: str | None = None,
    start_within_s: float | None = None,
) -> TurnResult:
    """The model call and its tool calls in one activity, where the session's tools run
    (its host's `task_queue`, to be taken within `start_within_s`)."""
    return await _long_step(
        TAKE_TURN,
        data,
        TurnResult,
        activity_id=f"turn-{data.turn}-{attempt}",
        # A turn may run several groups of calls one after the other.
        timeout_s=options.model_timeout_s + TURN_TOOL_SPANS * options.tool_timeout_s,
        heartbeat_s=max(options.model_heartbeat_timeout_s, options.tool_heartbeat_timeout_s),
        # As a model call: provider failures come back to the workflow; crashes and
        # timeouts are retried, a retry reusing the staged reply and finished results.
        # A worker of an older build (an upgrade in progress) has no such activity: the
        # workflow takes the turn the old way at once (`not_registered`).
        attempts=5,
        max_interval_s=30,
        non_retryable=[PROVIDER_ERROR, NOT_REGISTERED],
        summary=f"turn {data.turn}: "
        + (f"save {data.commit.turn}, " if data.commit else "")
        + f"call {data.snapshot.model}, run tools",
        task_queue=task_queue,
        start_within_s=start_within_s,
    )


TURN_TOOL_SPANS = 3
"""A turn's activity may run this many tool timeouts' worth of calls (after the model's)."""


async def run_tool(
    data: ToolCallInput,
    options: RunOptions,
    *,
    task_queue: str | None = None,
    start_within_s: float | None = None,
) -> ToolCallOutcome:
    """The tool call, on the shared task queue or its session's host's (`task_queue`),
    where a worker must take it within `start_within_s` (`workflows.hosts`)."""
    again = f"-again-{data.rescheduled}" if data.rescheduled else ""
    return await _long_step(
        RUN_TOOL,
        data,
        ToolCallOutcome,
        activity_id=f"turn-{data.turn}-tool-{data.call.id}{again}",
        timeout_s=options.tool_timeout_s,
        heartbeat_s=options.tool_heartbeat_timeout_s,
        # A tool that is not retry-safe answers its second attempt with "interrupted"
        # instead of running again, so retrying the activity is always safe.
        attempts=3,
        max_interval_s=10,
        summary=f"{data.call.name} {data.call.args_preview}"[:120],
        task_queue=task_queue,
        start_within_s=start_within_s,
    )


async def host_ready(task_queue: str, activity_id: str, start_within_s: float) -> str:
    """Whether a worker of a host is up: it takes this at once and answers its host's
    name. Not taken within `start_within_s`: a Temporal schedule-to-start timeout."""
    result = await workflow.execute_activity(
        HOST_READY,
        task_queue=task_queue,
        result_type=str,
        activity_id=activity_id,
        schedule_to_start_timeout=timedelta(seconds=start_within_s),
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(maximum_attempts=1),
        summary="is the host up?",
    )
    return cast(str, result)


NOT_REGISTERED = "NotFoundError"
"""The error type of an activity its worker does not have (the SDK's)."""


def not_registered(err: ActivityError) -> bool:
    """The worker that took the activity does not have it (it is of an older build)."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == NOT_REGISTERED


def not_taken(err: ActivityError) -> bool:
    """The activity failed because no worker took it in time (its host is gone)."""
    cause = err.cause
    return isinstance(cause, TemporalTimeout) and cause.type == TimeoutType.SCHEDULE_TO_START


async def start_subagent(data: StartSubagentInput) -> SubagentStart:
    summary = f"make sub-agent session {data.child_session_id[:8]} for {data.call.id}"
    return await _store_step(START_SUBAGENT, data, SubagentStart, summary)


async def finish_subagent(data: FinishSubagentInput) -> ToolCallOutcome:
    status = data.child.status if data.child else "not run"
    summary = f"stage sub-agent answer for {data.call.id} ({status})"
    return await _store_step(FINISH_SUBAGENT, data, ToolCallOutcome, summary)


async def stage_answer(data: StageAnswerInput) -> ToolCallOutcome:
    how = "answer" if data.answer is not None else "timeout"
    summary = f"stage the user's {how} for {data.call_id}"
    return await _store_step(STAGE_ANSWER, data, ToolCallOutcome, summary)


async def session_spend(data: SessionSpendInput) -> Spent:
    summary = "read what the session's other runs spent (its budget)"
    return await _store_step(SESSION_SPEND, data, Spent, summary)


# A firing's delivery retries while its session is busy with something that is not a run
# (a compaction, a move: short), or the store or Temporal cannot be reached; past this it
# fails, and the schedule shows the firing failed.
_DELIVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=15),
)
DELIVERY_DEADLINE = timedelta(minutes=10)


async def deliver_scheduled_prompt(data: DeliverScheduledPrompt) -> FiringOutcome:
    """A schedule's prompt delivered as a person's would be (`client.schedules`)."""
    result = await workflow.execute_activity(
        DELIVER_SCHEDULED_PROMPT,
        data,
        result_type=FiringOutcome,
        start_to_close_timeout=timedelta(seconds=60),
        schedule_to_close_timeout=DELIVERY_DEADLINE,
        retry_policy=_DELIVERY_RETRY,
        summary=f"deliver the prompt of schedule {data.firing.schedule_id}",
    )
    return cast(FiringOutcome, result)


def _describe(event: RunEventPayload) -> str:
    """One line for a history reader (local activity inputs are not shown in history)."""
    if isinstance(event, RetryScheduled):
        return (
            f"retry turn {event.turn} attempt {event.attempt} in {event.delay_ms} ms:"
            f" {event.error[:80]}"
        )
    if isinstance(event, PhaseChanged):
        return f"phase -> {event.phase}"
    return event.type


async def plan_compaction(data: ops.PlanCompactionInput) -> ops.PlanCompactionResult:
    return await _store_step(ops.PLAN_COMPACTION, data, ops.PlanCompactionResult, "plan compaction")


async def summarize(data: ops.SummarizeInput, options: RunOptions) -> ops.SummarizeResult:
    """The summary model call: a regular activity, like a model turn."""
    return await _long_step(
        ops.SUMMARIZE,
        data,
        ops.SummarizeResult,
        activity_id=f"{data.kind}-summary-{data.entry_id[:8]}",
        timeout_s=options.model_timeout_s,
        heartbeat_s=options.model_heartbeat_timeout_s,
        attempts=options.provider_retries + 1,
        max_interval_s=30,
        summary=f"{data.kind} summary of {len(data.entry_ids)} entries with {data.model}",
    )


async def commit_compaction(data: ops.CommitCompactionInput) -> str:
    return await _store_step(
        ops.COMMIT_COMPACTION,
        data,
        str,
        f"commit compaction (first kept {data.plan.first_kept_entry_id[:8]})",
    )


async def plan_navigation(data: ops.NavigateInput) -> ops.PlanNavigationResult:
    summary = f"plan navigation to {data.target_entry_id[:8]}"
    return await _store_step(ops.PLAN_NAVIGATION, data, ops.PlanNavigationResult, summary)


async def commit_navigation(data: ops.CommitNavigationInput) -> str:
    return await _store_step(ops.COMMIT_NAVIGATION, data, str, "commit navigation")


async def save_turn(data: ops.SaveTurnInput) -> str:
    return await _store_step(ops.SAVE_TURN, data, str, f"save point after turn {data.commit.turn}")


def provider_failure(err: ActivityError) -> ProviderFailure:
    """The provider failure a model activity's error carries, or a non-retryable stand-in."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == PROVIDER_ERROR and cause.details:
        return ProviderFailure.model_validate(cause.details[0])
    return ProviderFailure(kind="other", status=None, message=root_message(err), retryable=False)


def failure_type(err: FailureError) -> str | None:
    """The type a step's application error was raised with (its cause's), if any."""
    cause = err.cause if isinstance(err, ActivityError) else err
    return cause.type if isinstance(cause, ApplicationError) else None


"""Marks the histories of runs aborted while a step failed some other way."""


def cancelled(err: FailureError) -> bool:
    """The step failed because the run is being cancelled (aborted), or failed otherwise
    once an abort was asked for: its worker died with the cancel undelivered (the call
    then fails as lost), or the failure crossed the cancel. The run is aborted either
    way, as the user asked, rather than failing with the step's error."""
    if isinstance(err, CancelledError) or isinstance(err.cause, CancelledError):
        return True
    return workflow.cancellation_reason() is not None and workflow.patched(patches.ABORT_WINS)
