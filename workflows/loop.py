"""The agent loop (docs/SPEC.md, the agent loop): one run of a session, top to bottom.

    run_until_idle:                      the outer loop, over follow-ups
        run_turns:                       the inner loop, over tool calls and steering
            one_turn:                    the model call and its tool calls
            steering?                    (again while the model calls tools or steering
                                          queues up)
        follow-ups or guidance?          (another round of run_turns if so)
    complete

Each turn is one activity where the session's tools run: the model call, then the tool
calls it asks for (`activities.take_turn`); a turn whose calls wait for a decision here
(an approval, a sub-agent) runs them as activities of their own. The save point of a turn
rides on the next turn's activity (or on finish). Activities exchange references and
small results with this code, so the workflow history grows with each turn's new
content, not the context.

Plain functions over a `Run` (its state and the steps at its edges, `workflows.run`);
the gates they pass (budgets, approvals, hosts, sub-agents) answer go, stop or wait.
`SessionRun` (`workflows.session_run`) holds the run and its handlers: steering,
follow-ups, guidance and config changes arrive as signals; abort is cancellation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.compaction import CHARS_PER_TOKEN, context_window_of
    from duragent.domain.events import (
        QuestionAsked,
        RetryScheduled,
        RunEventPayload,
        ToolExecutionStart,
    )
    from duragent.domain.fallbacks import Skipped, ToolRun, error_reply
    from duragent.domain.guidance import GuidanceItem, InjectionPoint
    from duragent.domain.hooks import ToolOutcomeSummary, TurnSummary
    from duragent.domain.hosts import host_task_queue
    from duragent.domain.injection import inject, inject_replan, injection_point
    from duragent.domain.questions import ASK_USER_TOOL
    from duragent.domain.runs import Phase, RunResult
    from duragent.domain.save_points import CommitSlot, TurnCommit, result_entry_id
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import (
        ModelReply,
        ProviderFailure,
        TakeGuidanceInput,
        ToolCallInput,
        ToolCallOutcome,
        TurnInput,
        TurnResult,
    )

from duragent.workflows import hosts, patches, steps
from duragent.workflows.budgets import budget_gate
from duragent.workflows.hook_runner import HookError
from duragent.workflows.run import Run
from duragent.workflows.subagents import run_subagent
from duragent.workflows.tool_batch import BatchResult, run_tool_calls


@dataclass
class EndedTurn:
    """A model turn whose tool calls have all ended, not yet committed."""

    turn: TurnInProgress
    reply: ModelReply
    batch: BatchResult
    slots: list[CommitSlot]
    """The assistant message, then one result per call."""
    stop: bool
    """A hook, a tool or the turn limit ends the run here, whatever is queued."""
    guided: list[GuidanceItem] = field(default_factory=list)
    """Guidance the turn's activity took while its calls ran, to inject after them."""


async def run_until_idle(run: Run) -> RunResult:
    """The outer loop: turns until the agent would stop; then the follow-ups queued
    meanwhile (or guidance sent meanwhile) start another round. The run ends when a
    round ends with neither, or when something stops it."""
    pending: TurnCommit | None = None
    while True:
        end = await run_turns(run, pending)
        if isinstance(end, RunResult):
            return end
        if end.stop:
            return await _complete(run, end, run.commit(end.slots, continues=False))
        follow_ups = run.state.inbox.take_follow_ups()
        commit = run.commit(end.slots, continues=True, queued=follow_ups, queue="follow_up")
        guided = await _guidance_after(run, end, commit)
        run.state.current = None
        if not follow_ups and guided is None:
            return await _complete(run, end, commit)
        pending = await _between_turns(run, end, guided or commit)


async def run_turns(run: Run, pending: TurnCommit | None) -> EndedTurn | RunResult:
    """The inner loop: a model turn (saving `pending` first) and its tool calls, and
    again while the model calls tools or steering queues up. Returns the turn after
    which the agent would stop (or must), or the result of a run a turn ended."""
    while True:
        if pending is None:  # input that queued up before this model call
            pending = await _waiting_input(run)
        pending, stopped = await budget_gate(run, pending)
        if stopped is not None:
            return stopped
        end = await one_turn(run, pending)
        if isinstance(end, TurnCommit):  # re-planned with guidance before any tool ran
            pending = end
            continue
        if isinstance(end, RunResult) or end.stop:
            return end
        # Steering waits for every call of the turn; follow-ups for the agent to stop.
        steering = run.state.inbox.take_steering()
        if not end.turn.calls and not steering:
            return end
        commit = run.commit(end.slots, continues=True, queued=steering)
        commit = await _guidance_after(run, end, commit) or commit
        run.state.current = None
        pending = await _between_turns(run, end, commit)


async def one_turn(run: Run, pending: TurnCommit | None) -> EndedTurn | TurnCommit | RunResult:
    """One model call and the tool calls it asks for. Guidance pending when the model
    has planned calls turns them into a re-plan: the commit for the next call."""
    state = run.state
    state.turn += 1
    state.current = TurnInProgress(assistant_id=run.new_id())
    result = await _turn_activity(run, pending)
    assistant_id = state.current.assistant_id
    if isinstance(result, ProviderFailure):
        fallback = error_reply(result, state.snapshot.model, run.now_ms())
        slot = CommitSlot(entry_id=assistant_id, fallback=fallback)
        commit = run.commit([slot], continues=False)
        return await run.finish([commit], "error", result.message, assistant_id)
    reply = result.reply
    _count_reply(run, assistant_id, reply)
    calls = reply.tool_calls
    result_ids = (
        [result_entry_id(assistant_id, call.id) for call in calls]
        if workflow.patched(patches.TURN_ONE_ACTIVITY)
        else [run.new_id() for _ in calls]
    )
    turn = state.current = TurnInProgress(
        assistant_id,
        calls,
        result_ids,
        replied=True,
        calls_may_have_begun=result.calls_may_have_begun,
    )
    state.inbox.drop_taken([item.id for item in result.guidance])
    batch = await _tool_calls(run, turn, result)
    if isinstance(batch, TurnCommit):  # re-planned: no call ran
        return batch
    slots = turn.finished_slots(batch.outcomes, run.now_ms())
    if (host_gone := hosts.gone(batch.outcomes)) is not None:  # saved, then the end
        return await run.finish(
            [run.commit(slots, continues=False)], "error", host_gone, assistant_id
        )
    summary = _summary(run, reply, calls, batch.outcomes)
    try:
        stop = state.hooks.should_stop_after_turn(summary) or _terminated(batch.outcomes)
        state.override = None if stop else state.hooks.prepare_next_turn(summary)
    except HookError as err:
        commit = run.commit(slots, continues=False)
        return await run.finish([commit], "error", str(err), assistant_id)
    stop = stop or _turn_limit_reached(run)
    return EndedTurn(turn, reply, batch, slots, stop=stop, guided=result.guidance)


def _count_reply(run: Run, assistant_id: str, reply: ModelReply) -> None:
    """What a reply changes in the run: its usage and cost, the snapshot and approval
    policy the next calls use."""
    state = run.state
    state.usage = state.usage.plus(reply.usage)
    state.budgets.add_turn(reply.cost)
    state.last_assistant = assistant_id
    state.snapshot = reply.snapshot or state.snapshot
    run.approvals.policy = reply.approval_policy or run.approvals.policy


async def _tool_calls(
    run: Run, turn: TurnInProgress, result: TurnResult
) -> BatchResult | TurnCommit:
    """How the turn's calls ended: as the turn's activity ran them, or run here (the
    activity left them: an approval, a `delegate`, a run from before); or the re-plan
    guidance asked for before any started."""
    if result.replanned:  # the activity took guidance before any call started
        return _replanned(run, turn, result.guidance)
    if result.ran_tools:
        stopped = set(result.interrupted)  # those without an outcome stopped before it
        return BatchResult(
            outcomes=[
                outcome
                if outcome is not None
                else asyncio.CancelledError()
                if call.id in stopped
                else Skipped()
                for call, outcome in zip(turn.calls, result.outcomes, strict=True)
            ],
            interrupted=result.interrupted,
            skipped=result.skipped,
        )
    inbox = run.state.inbox
    if turn.calls and inbox.guidance:
        replanned = await _replan(run, turn)
        if replanned is not None:
            return replanned
    inbox.activity = "tools"
    batch = await run_tool_calls(turn.calls, partial(_run_tool, run, turn), inbox.guidance_intent)
    inbox.activity = "between"
    return batch


async def _complete(run: Run, end: EndedTurn, commit: TurnCommit) -> RunResult:
    run.state.current = None
    commit = commit.model_copy(update={"continues": False})
    return await run.finish([commit], "completed", None, end.turn.assistant_id)


async def _between_turns(run: Run, end: EndedTurn, commit: TurnCommit) -> TurnCommit | None:
    """Compact a context that is nearly full and continue as new when it is time;
    `commit` if neither saved it, for the next model call to save."""
    pending: TurnCommit | None = commit
    if _context_nearly_full(run, end.reply, end.batch.outcomes):
        await run.save(commit)
        pending = None
        await run.compact("auto")
    if run.time_to_continue_as_new():
        if pending is not None:
            await run.save(pending)
        await run.continue_as_new()
    return pending


async def _waiting_input(run: Run) -> TurnCommit | None:
    """Steering, guidance and writes that arrived when no turn could take them (at
    the start, during a compaction): a commit of their own, ahead of the model call."""
    queued = run.state.inbox.take_steering()
    if not (queued or run.state.inbox.guidance or run.state.inbox.pending_writes):
        return None
    commit = run.commit([], continues=True, queued=queued)
    if run.state.inbox.guidance:
        commit = await _guided(run, commit, "before_model") or commit
    return commit


async def _turn_activity(run: Run, commit: TurnCommit | None) -> TurnResult | ProviderFailure:
    """The turn's activity (which saves `commit` first); a context the provider refuses
    as too long is compacted and the call tried once more."""
    run.state.unsaved = [commit] if commit else []
    run.state.inbox.activity = "model"
    result = await _attempts(run, commit)
    if commit is not None:  # the model activity saved the previous turn first
        run.state.leaf, run.state.unsaved = commit.leaf_after(run.state.leaf), []
        run.state.inbox.writes_saved()
    overflow = isinstance(result, ProviderFailure) and result.kind == "context_overflow"
    compacted = overflow and run.state.input.options.compaction.enabled
    if compacted and (await run.compact("overflow")).compacted:
        result = await _attempts(run, None)
    run.state.inbox.activity = "between"
    return result


def _context_nearly_full(run: Run, reply: ModelReply, outcomes: list[ToolRun]) -> bool:
    """Auto-compaction (checked at every save point): the last call's reported tokens
    plus about a token per four characters of what the turn added."""
    settings = run.state.input.options.compaction
    if not settings.enabled:
        return False
    window = settings.context_window or context_window_of(run.state.snapshot.model)
    added = sum(o.content_chars for o in outcomes if isinstance(o, ToolCallOutcome))
    tokens = reply.usage.total_tokens + added // CHARS_PER_TOKEN
    return tokens > window - settings.reserve_tokens


# Runtime guidance: taken at safe points, if the store still lets the run.


async def _guidance_after(run: Run, end: EndedTurn, commit: TurnCommit) -> TurnCommit | None:
    """`commit` with the guidance pending after a turn's tool calls, if any is taken."""
    if not (end.guided or run.state.inbox.guidance):
        return None
    batch = end.batch
    arrived = (
        "tools"
        if end.guided
        else run.state.inbox.arrivals.get(run.state.inbox.guidance[0].id, "between")
    )
    point = injection_point(
        arrived, bool(end.turn.calls), bool(batch.interrupted), bool(batch.skipped)
    )
    return await _guided(run, commit, point, batch.interrupted, batch.skipped, end.guided)


async def _guided(
    run: Run,
    commit: TurnCommit,
    point: InjectionPoint,
    interrupted: list[str] | None = None,
    skipped: list[str] | None = None,
    taken: list[GuidanceItem] | None = None,
) -> TurnCommit | None:
    """`commit` with the guidance a turn's activity `taken` and the pending guidance
    the store still lets this run take; None if there is none."""
    items = [*(taken or []), *(await _take_guidance(run) if run.state.inbox.guidance else [])]
    if not items:
        return None
    return inject(commit, items, point, run.now_ms(), interrupted, skipped)


async def _replan(run: Run, turn: TurnInProgress) -> TurnCommit | None:
    """before_tools: answer every planned call as not run, then inject the guidance."""
    items = await _take_guidance(run)
    if not items:
        return None
    return _replanned(run, turn, items)


def _replanned(run: Run, turn: TurnInProgress, items: list[GuidanceItem]) -> TurnCommit:
    slots = turn.replanned_slots(run.now_ms())
    commit = run.commit(slots, continues=True, queued=run.state.inbox.take_steering())
    return inject_replan(commit, items, [call.id for call in turn.calls], run.now_ms())


async def _take_guidance(run: Run) -> list[GuidanceItem]:
    """The pending guidance items the store lets this run take (compare-and-set): one
    edited or deleted since it was sent is dropped."""
    items = run.state.inbox.take_guidance()
    taken = await steps.take_guidance(
        TakeGuidanceInput(
            session_id=run.state.input.session_id,
            run_id=run.state.input.run_id,
            item_ids=[item.id for item in items],
        )
    )
    return [item for item in items if item.id in taken.taken]


# The pieces of a turn.


async def _attempts(run: Run, commit: TurnCommit | None) -> TurnResult | ProviderFailure:
    """One turn's activity; retryable provider failures back off here, in the `retry`
    phase."""
    data, current = run.state.input, run.state.current
    assert current is not None
    request = TurnInput(
        session_id=data.session_id,
        run_id=data.run_id,
        turn=run.state.turn,
        leaf_id=run.state.leaf,
        entry_id=current.assistant_id,
        snapshot=run.state.snapshot,
        commit=commit,
        override=run.state.override,
    )
    attempt = 1
    while True:
        try:
            return await _attempt(run, request, attempt)
        except ActivityError as err:
            if steps.cancelled(err):  # the run is being aborted
                raise asyncio.CancelledError from err
            failure = steps.provider_failure(err)
        if not failure.retryable or attempt > data.options.provider_retries:
            return failure
        delay_ms = failure.retry_after_ms or int(
            data.options.provider_backoff_s * 1000 * 2 ** (attempt - 1)
        )
        retry = RetryScheduled(
            turn=run.state.turn, attempt=attempt, delay_ms=delay_ms, error=failure.message
        )
        await run.set_phase("retry", retry)
        await workflow.sleep(timedelta(milliseconds=delay_ms))
        await run.set_phase("turn")
        attempt += 1


async def _attempt(run: Run, request: TurnInput, attempt: int) -> TurnResult:
    """The turn as one activity where the session's tools run: its host's queue, or
    this run's. The model call alone (its tool calls then activities of their own) in
    runs from before, when a gone host does not take the turn in time (its calls then
    wait for the host), and when a worker of an older build took it (an upgrade)."""
    options = run.state.input.options
    if workflow.patched(patches.TURN_ONE_ACTIVITY):
        host = run.state.host
        queue = host_task_queue(workflow.info().task_queue, host) if host else None
        try:
            result = await steps.take_turn(
                request,
                options,
                attempt,
                task_queue=queue,
                start_within_s=options.host_check_s if queue else None,
            )
            if workflow.cancellation_reason() is not None:
                # Aborted while its tools ran: the activity stopped them and returned
                # what they did (their results are staged for the abort's save).
                raise asyncio.CancelledError
            return result
        except ActivityError as err:
            if not (queue and steps.not_taken(err)) and not steps.not_registered(err):
                raise
            # Not taken in time: maybe a retry after a worker lost midway, whose attempt
            # had started the calls. Their own activities find what it did first.
            lost = (
                bool(queue)
                and steps.not_taken(err)
                and workflow.patched(patches.LOST_TURN_CALLS_RESCHEDULED)
            )
            reply = await steps.model_turn(request, options, attempt)
            return TurnResult(reply=reply, calls_may_have_begun=lost)
    return TurnResult(reply=await steps.model_turn(request, options, attempt))


async def _run_tool(run: Run, turn: TurnInProgress, call: ToolCallRef) -> ToolCallOutcome:
    if call.approval is not None and workflow.patched(patches.TOOL_APPROVAL):
        where = (run.state.turn, turn.assistant_id, run.now_ms())
        call = await run.approvals.wait(call, *where, partial(_approval_event, run))
    if call.traits.child_session and call.refused is None:  # delegate: a sub-agent
        return await run_subagent(run, turn, call)
    if call.question is not None and call.refused is None and workflow.patched(patches.ASK_USER):
        return await run.questions.wait(run, turn, call, partial(_question_event, run))
    data = ToolCallInput(
        session_id=run.state.input.session_id,
        run_id=run.state.input.run_id,
        turn=run.state.turn,
        assistant_entry_id=turn.assistant_id,
        result_entry_id=turn.result_id(call.id),
        call=call,
        rescheduled=1 if turn.calls_may_have_begun else 0,
    )
    if run.state.host is not None and workflow.patched(patches.HOST_QUEUES):  # the session's host
        return await run.host_waits.run_tool(run, run.state.host, data, run.state.input.options)
    return await steps.run_tool(data, run.state.input.options)


async def _approval_event(run: Run, waiting: bool, event: RunEventPayload) -> None:
    """An approval event; the phase is `awaiting_approval` while any call waits (else
    `awaiting_input` while a question does)."""
    phase: Phase = "awaiting_approval" if waiting else _waiting_phase(run)
    if phase != run.state.phase:
        await run.set_phase(phase, event)
        return
    await run.emit("approval", event)


async def _question_event(run: Run, event: RunEventPayload) -> None:
    """An `ask_user` event (the call's start with its question); the phase is
    `awaiting_input` while a question waits and no call waits for approval."""
    events: list[RunEventPayload] = [event]
    if isinstance(event, QuestionAsked):
        args = event.model_dump(include={"question", "choices", "allow_other"}, exclude_none=True)
        events.insert(
            0, ToolExecutionStart(tool_call_id=event.call_id, tool_name=ASK_USER_TOOL, args=args)
        )
    phase = _waiting_phase(run)
    if phase != run.state.phase:
        await run.set_phase(phase, *events)
        return
    await run.emit("question", *events)


def _waiting_phase(run: Run) -> Phase:
    """The phase of a turn whose calls may wait for people: approvals first."""
    if run.approvals.pending():
        return "awaiting_approval"
    return "awaiting_input" if run.questions.waiting else "turn"


def _summary(
    run: Run, reply: ModelReply, calls: list[ToolCallRef], outcomes: list[ToolRun]
) -> TurnSummary:
    return TurnSummary(
        turn=run.state.turn,
        model=run.state.snapshot.model,
        stop_reason=reply.stop_reason,
        text_preview=reply.text_preview,
        usage=reply.usage,
        run_usage=run.state.usage,
        tools=[
            ToolOutcomeSummary(
                name=call.name,
                args_preview=call.args_preview,
                is_error=not isinstance(outcome, ToolCallOutcome) or outcome.is_error,
                preview=outcome.preview if isinstance(outcome, ToolCallOutcome) else "",
            )
            for call, outcome in zip(calls, outcomes, strict=True)
        ],
    )


def _turn_limit_reached(run: Run) -> bool:
    limit = run.state.input.max_turns
    return limit is not None and run.state.turn >= limit


def _terminated(outcomes: list[ToolRun]) -> bool:
    """A tool's result asked the run to stop (afterToolCall's `terminate`)."""
    return any(isinstance(o, ToolCallOutcome) and o.terminate for o in outcomes)
