"""The agent loop (docs/SPEC.md, the agent loop): one run of a session, top to bottom.

    run_until_idle:                      the outer loop, over follow-ups
        run_turns:                       the inner loop, over tool calls and steering
            one_turn:                    the model call and its tool calls
            steering?                    (again while the model calls tools or steering
                                          queues up)
        follow-ups or guidance?          (another round of run_turns if so)
    complete

Each turn is one activity where the session's tools run: the model call, then the tool
calls it asks for (`activities.take_turn`, called as `workflows.turn_activity` says); a
turn whose calls wait for a decision here (an approval, a sub-agent) runs them here
(`workflows.tool_batch`). Guidance is taken at safe points (`workflows.guidance_points`).
The save point of a turn rides on the next turn's activity (or on finish). Activities
exchange references and small results with this code, so the workflow history grows with
each turn's new content, not the context.

Plain functions over a `Run` (its state and the steps at its edges, `workflows.run`);
the gates they pass (budgets, approvals, hosts, sub-agents) answer go, stop or wait.
`SessionRun` (`workflows.session_run`) holds the run and its handlers: steering,
follow-ups, guidance and config changes arrive as signals; abort is cancellation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.compaction import CHARS_PER_TOKEN, context_window_of
    from duragent.domain.fallbacks import Skipped, ToolRun, error_reply
    from duragent.domain.guidance import GuidanceItem
    from duragent.domain.hooks import ToolOutcomeSummary, TurnSummary
    from duragent.domain.runs import RunResult
    from duragent.domain.save_points import CommitSlot, TurnCommit, result_entry_id
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import ModelReply, ProviderFailure, ToolCallOutcome, TurnResult

from duragent.workflows import hosts, output, patches
from duragent.workflows.budgets import budget_gate
from duragent.workflows.guidance_points import after_calls, guided, replan, replanned
from duragent.workflows.hook_runner import HookError
from duragent.workflows.run import Run
from duragent.workflows.tool_batch import BatchResult, run_tool, run_tool_calls
from duragent.workflows.turn_activity import turn_activity


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
        if not (follow_ups or end.guided or run.state.inbox.guidance):
            asked = output.missing(run)  # an answer in text where an output was due
            if isinstance(asked, str):
                commit = run.commit(end.slots, continues=False)
                return await run.finish([commit], "error", asked, end.turn.assistant_id)
            follow_ups = [asked] if asked is not None else []
        commit = run.commit(end.slots, continues=True, queued=follow_ups, queue="follow_up")
        with_guidance = await after_calls(run, commit, end.turn, end.batch, end.guided)
        run.state.current = None
        if not follow_ups and with_guidance is None:
            return await _complete(run, end, commit)
        pending = await _between_turns(run, end, with_guidance or commit)


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
        commit = await after_calls(run, commit, end.turn, end.batch, end.guided) or commit
        run.state.current = None
        pending = await _between_turns(run, end, commit)


async def one_turn(run: Run, pending: TurnCommit | None) -> EndedTurn | TurnCommit | RunResult:
    """One model call and the tool calls it asks for. Guidance pending when the model
    has planned calls turns them into a re-plan: the commit for the next call."""
    state = run.state
    state.turn += 1
    state.current = TurnInProgress(assistant_id=run.new_id())
    result = await turn_activity(run, pending)
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
    if (refused := output.refused(run, calls, batch.outcomes)) is not None:
        commit = run.commit(slots, continues=False)
        return await run.finish([commit], "error", refused, assistant_id)
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
        return replanned(run, turn, result.guidance)
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
        planned_again = await replan(run, turn)
        if planned_again is not None:
            return planned_again
    inbox.activity = "tools"
    batch = await run_tool_calls(turn.calls, partial(run_tool, run, turn), inbox.guidance_intent)
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
        commit = await guided(run, commit, "before_model") or commit
    return commit


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
