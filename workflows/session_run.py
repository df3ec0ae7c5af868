"""The agent loop (docs/SPEC.md, the agent loop) as a Temporal workflow: one run of a session.

    start run
    run_until_idle:                      the outer loop, over follow-ups
        run_turns:                       the inner loop, over tool calls and steering
            model turn -> tool calls -> steering?  (again while there is either)
        follow-ups or guidance?  (another round of run_turns if so)
    finish

Each turn is one activity where the session's tools run: the model call, then the tool
calls it asks for (`activities.take_turn`); a turn whose calls wait for a decision here
(an approval, a sub-agent) runs them as activities of their own. The save point of a turn
rides on the next turn's activity (or on finish). Activities exchange references and
small results with this code, so the workflow history grows with each turn's new
content, not the context.
Steering, follow-ups and config changes arrive as signals; abort is cancellation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.approvals import ApprovalDecision, ApprovalOutcome, PendingApproval
    from duragent.domain.budgets import BudgetRaise, BudgetView
    from duragent.domain.changes import SessionChange
    from duragent.domain.compaction import CHARS_PER_TOKEN, context_window_of
    from duragent.domain.events import RetryScheduled, RunEventPayload
    from duragent.domain.fallbacks import Skipped, ToolRun, TurnInProgress, error_reply
    from duragent.domain.guidance import GuidanceItem, InjectionPoint
    from duragent.domain.hooks import ToolOutcomeSummary, TurnSummary
    from duragent.domain.hosts import host_task_queue
    from duragent.domain.injection import inject, inject_replan, injection_point
    from duragent.domain.queues import QueuedMessage
    from duragent.domain.runs import Phase, RunInput, RunResult, RunView
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turns import (
        CommitSlot,
        ModelTurnInput,
        ModelTurnResult,
        ProviderFailure,
        RecordEventsInput,
        TakeGuidanceInput,
        TakeTurnResult,
        ToolCallInput,
        ToolCallOutcome,
        TurnCommit,
        result_entry_id,
    )

from duragent.workflows import hosts, steps
from duragent.workflows.approvals import PATCH, ApprovalGate
from duragent.workflows.budgets import budget_gate
from duragent.workflows.hook_runner import HookError
from duragent.workflows.run_base import RunBase
from duragent.workflows.subagents import run_subagent
from duragent.workflows.tool_batch import BatchResult, run_tool_calls


@dataclass
class TurnEnd:
    """A model turn whose tool calls have all ended, not yet committed."""

    turn: TurnInProgress
    reply: ModelTurnResult
    batch: BatchResult
    slots: list[CommitSlot]
    """The assistant message, then one result per call."""
    stop: bool
    """A hook, a tool or the turn limit ends the run here, whatever is queued."""
    guided: list[GuidanceItem] = field(default_factory=list)
    """Guidance the turn's activity took while its calls ran, to inject after them."""


ONE_ACTIVITY_PATCH = "turn-one-activity"
"""Marks the runs whose turns are one activity (model call and tool calls together)."""


@workflow.defn(name="SessionRun")
class SessionRun(RunBase):
    def __init__(self) -> None:
        super().__init__()
        self._approvals = ApprovalGate()
        self._host_waits = hosts.HostWaits()

    @workflow.signal
    def steer(self, item: QueuedMessage) -> None:
        """Delivered after the current turn's tool calls, before the next model call."""
        self._inbox.steer(item)

    @workflow.signal
    def follow_up(self, item: QueuedMessage) -> None:
        """Delivered when the agent would otherwise stop."""
        self._inbox.follow_up(item)

    @workflow.signal
    def guidance(self, item: GuidanceItem) -> None:
        """Runtime guidance: taken at the nearest safe point (docs/SPEC.md, runtime guidance)."""
        self._inbox.guide(item)

    @workflow.signal
    def change(self, change: SessionChange) -> None:
        """Config setters and session writes: pending until the next save point."""
        self._inbox.change(change)

    @workflow.update
    def decide_approval(self, decision: ApprovalDecision) -> ApprovalOutcome:
        """Approve or deny a waiting tool call (docs/SPEC.md, tool approval)."""
        outcome, change = self._approvals.decide(
            decision, self._inbox.pending_writes, self._new_id(), self._now_ms()
        )
        if change is not None:  # "always": saved with the turn, like any config change
            self._inbox.change(change)
        return outcome

    @decide_approval.validator
    def _check_approval(self, decision: ApprovalDecision) -> None:
        self._approvals.check(decision)

    @workflow.query
    def approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a decision."""
        return self._approvals.pending()

    @workflow.update
    def raise_budget(self, change: BudgetRaise) -> BudgetView:
        """Raise the run's (or the session's) budget; a run waiting on it goes on
        (docs/SPEC.md, budgets)."""
        made = self._budgets.take_raise(change, self._new_id(), self._now_ms())
        if made is not None:  # the session's: saved with the turn, like any config change
            self._inbox.change(made)
        return self.budget()

    @raise_budget.validator
    def _check_raise(self, change: BudgetRaise) -> None:
        self._budgets.check_raise(change, self._budget_spent(), self._session_budget())

    @workflow.query
    def budget(self) -> BudgetView:
        """The run's budgets, what it and its session spent, the limits it waits on."""
        return self._budgets.view(self._budget_spent(), self._session_budget())

    @workflow.query
    def phase(self) -> Phase:
        return self._phase

    @workflow.query
    def state(self) -> RunView:
        return RunView(
            run_id=self._run_id,
            phase=self._phase,
            turn=self._turn,
            config=self._inbox.config,
            steering=self._inbox.steering,
            follow_ups=self._inbox.follow_ups,
            pending_writes=self._inbox.unsaved_writes(),
            guidance=self._inbox.guidance,
            awaiting_host=self._host if self._phase == "awaiting_host" else None,
            budget=self.budget()
            if self._budgets.in_force(self._budgets.run_budget, self._session_budget())
            else None,
        )

    # The run.

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        self._run, self._run_id, self._phase = run, run.run_id, "turn"
        self._budgets.begin(run, self._now_ms())
        try:
            if run.carried is not None:
                self._restore(run.carried)
            elif (failed := await self._start(run)) is not None:
                return failed
            return await self._run_until_idle()
        except asyncio.CancelledError:
            return await self._abort()

    async def _run_until_idle(self) -> RunResult:
        """The outer loop: turns until the agent would stop; then the follow-ups queued
        meanwhile (or guidance sent meanwhile) start another round. The run ends when a
        round ends with neither, or when something stops it."""
        pending: TurnCommit | None = None
        while True:
            end = await self._run_turns(pending)
            if isinstance(end, RunResult):
                return end
            if end.stop:
                return await self._complete(end, self._commit(end.slots, continues=False))
            follow_ups = self._inbox.take_follow_ups()
            commit = self._commit(end.slots, continues=True, queued=follow_ups, queue="follow_up")
            guided = await self._guidance_after(end, commit)
            self._current = None
            if not follow_ups and guided is None:
                return await self._complete(end, commit)
            pending = await self._between_turns(end, guided or commit)

    async def _run_turns(self, pending: TurnCommit | None) -> TurnEnd | RunResult:
        """The inner loop: a model turn (saving `pending` first) and its tool calls, and
        again while the model calls tools or steering queues up. Returns the turn after
        which the agent would stop (or must), or the result of a run a turn ended."""
        while True:
            if pending is None:  # input that queued up before this model call
                pending = await self._waiting_input()
            pending, stopped = await budget_gate(self, pending)
            if stopped is not None:
                return stopped
            end = await self._take_turn(pending)
            if isinstance(end, TurnCommit):  # re-planned with guidance before any tool ran
                pending = end
                continue
            if isinstance(end, RunResult) or end.stop:
                return end
            # Steering waits for every call of the turn; follow-ups for the agent to stop.
            steering = self._inbox.take_steering()
            if not end.turn.calls and not steering:
                return end
            commit = self._commit(end.slots, continues=True, queued=steering)
            commit = await self._guidance_after(end, commit) or commit
            self._current = None
            pending = await self._between_turns(end, commit)

    async def _take_turn(self, pending: TurnCommit | None) -> TurnEnd | TurnCommit | RunResult:
        """One model call and the tool calls it asks for. Guidance pending when the model
        has planned calls turns them into a re-plan: the commit for the next call."""
        self._turn += 1
        self._current = TurnInProgress(assistant_id=self._new_id())
        taken = await self._model_turn(pending)
        assistant_id = self._current.assistant_id
        if isinstance(taken, ProviderFailure):
            fallback = error_reply(taken, self._snapshot.model, self._now_ms())
            slot = CommitSlot(entry_id=assistant_id, fallback=fallback)
            commit = self._commit([slot], continues=False)
            return await self._finish([commit], "error", taken.message, assistant_id)
        reply = taken.reply
        self._usage = self._usage.plus(reply.usage)
        self._budgets.add_turn(reply.cost)
        self._last_assistant = assistant_id
        self._snapshot = reply.snapshot or self._snapshot
        self._approvals.policy = reply.approval_policy or self._approvals.policy
        calls = reply.tool_calls
        result_ids = (
            [result_entry_id(assistant_id, call.id) for call in calls]
            if workflow.patched(ONE_ACTIVITY_PATCH)
            else [self._new_id() for _ in calls]
        )
        turn = self._current = TurnInProgress(assistant_id, calls, result_ids, replied=True)
        self._inbox.drop_taken([item.id for item in taken.guidance])
        if taken.replanned:  # the activity took guidance before any call started
            return self._replanned(turn, taken.guidance)
        if taken.ran_tools:
            batch = BatchResult(
                outcomes=[o if o is not None else Skipped() for o in taken.outcomes],
                interrupted=taken.interrupted,
                skipped=taken.skipped,
            )
        else:
            if calls and self._inbox.guidance:
                replanned = await self._replan(turn)
                if replanned is not None:
                    return replanned
            self._inbox.activity = "tools"
            batch = await run_tool_calls(
                calls, partial(self._run_tool, turn), self._inbox.guidance_intent
            )
            self._inbox.activity = "between"
        slots = turn.finished_slots(batch.outcomes, self._now_ms())
        if (host_gone := hosts.gone(batch.outcomes)) is not None:  # saved, then the end
            return await self._finish(
                [self._commit(slots, continues=False)], "error", host_gone, assistant_id
            )
        summary = self._summary(reply, calls, batch.outcomes)
        try:
            stop = self._hooks.should_stop_after_turn(summary) or _terminated(batch.outcomes)
            self._override = None if stop else self._hooks.prepare_next_turn(summary)
        except HookError as err:
            commit = self._commit(slots, continues=False)
            return await self._finish([commit], "error", str(err), assistant_id)
        stop = stop or self._turn_limit_reached()
        guided = [] if taken.replanned else taken.guidance
        return TurnEnd(turn, reply, batch, slots, stop=stop, guided=guided)

    async def _complete(self, end: TurnEnd, commit: TurnCommit) -> RunResult:
        self._current = None
        commit = commit.model_copy(update={"continues": False})
        return await self._finish([commit], "completed", None, end.turn.assistant_id)

    async def _between_turns(self, end: TurnEnd, commit: TurnCommit) -> TurnCommit | None:
        """Compact a context that is nearly full and continue as new when it is time;
        `commit` if neither saved it, for the next model call to save."""
        pending: TurnCommit | None = commit
        if self._context_nearly_full(end.reply, end.batch.outcomes):
            await self._save(commit)
            pending = None
            await self._compact("auto")
        if self._time_to_continue_as_new():
            if pending is not None:
                await self._save(pending)
            await self._continue_as_new()
        return pending

    async def _waiting_input(self) -> TurnCommit | None:
        """Steering, guidance and writes that arrived when no turn could take them (at
        the start, during a compaction): a commit of their own, ahead of the model call."""
        queued = self._inbox.take_steering()
        if not (queued or self._inbox.guidance or self._inbox.pending_writes):
            return None
        commit = self._commit([], continues=True, queued=queued)
        if self._inbox.guidance:
            commit = await self._guided(commit, "before_model") or commit
        return commit

    async def _model_turn(self, commit: TurnCommit | None) -> TakeTurnResult | ProviderFailure:
        """The turn's activity (which saves `commit` first); a context the provider refuses
        as too long is compacted and the call tried once more."""
        self._unsaved = [commit] if commit else []
        self._inbox.activity = "model"
        reply = await self._call_model(commit)
        if commit is not None:  # the model activity saved the previous turn first
            self._leaf, self._unsaved = commit.leaf_after(self._leaf), []
            self._inbox.writes_saved()
        overflow = isinstance(reply, ProviderFailure) and reply.kind == "context_overflow"
        compacted = overflow and self._run.options.compaction.enabled
        if compacted and (await self._compact("overflow")).compacted:
            reply = await self._call_model(None)
        self._inbox.activity = "between"
        return reply

    def _context_nearly_full(self, reply: ModelTurnResult, outcomes: list[ToolRun]) -> bool:
        """Auto-compaction (checked at every save point): the last call's reported tokens
        plus about a token per four characters of what the turn added."""
        settings = self._run.options.compaction
        if not settings.enabled:
            return False
        window = settings.context_window or context_window_of(self._snapshot.model)
        added = sum(o.content_chars for o in outcomes if isinstance(o, ToolCallOutcome))
        tokens = reply.usage.total_tokens + added // CHARS_PER_TOKEN
        return tokens > window - settings.reserve_tokens

    # Runtime guidance: taken at safe points, if the store still lets the run.

    async def _guidance_after(self, end: TurnEnd, commit: TurnCommit) -> TurnCommit | None:
        """`commit` with the guidance pending after a turn's tool calls, if any is taken."""
        if not (end.guided or self._inbox.guidance):
            return None
        batch = end.batch
        arrived = (
            "tools"
            if end.guided
            else self._inbox.arrivals.get(self._inbox.guidance[0].id, "between")
        )
        point = injection_point(
            arrived, bool(end.turn.calls), bool(batch.interrupted), bool(batch.skipped)
        )
        return await self._guided(commit, point, batch.interrupted, batch.skipped, end.guided)

    async def _guided(
        self,
        commit: TurnCommit,
        point: InjectionPoint,
        interrupted: list[str] | None = None,
        skipped: list[str] | None = None,
        taken: list[GuidanceItem] | None = None,
    ) -> TurnCommit | None:
        """`commit` with the guidance a turn's activity `taken` and the pending guidance
        the store still lets this run take; None if there is none."""
        items = [*(taken or []), *(await self._take_guidance() if self._inbox.guidance else [])]
        if not items:
            return None
        return inject(commit, items, point, self._now_ms(), interrupted, skipped)

    async def _replan(self, turn: TurnInProgress) -> TurnCommit | None:
        """before_tools: answer every planned call as not run, then inject the guidance."""
        items = await self._take_guidance()
        if not items:
            return None
        return self._replanned(turn, items)

    def _replanned(self, turn: TurnInProgress, items: list[GuidanceItem]) -> TurnCommit:
        slots = turn.replanned_slots(self._now_ms())
        commit = self._commit(slots, continues=True, queued=self._inbox.take_steering())
        return inject_replan(commit, items, [call.id for call in turn.calls], self._now_ms())

    async def _take_guidance(self) -> list[GuidanceItem]:
        """The pending guidance items the store lets this run take (compare-and-set): one
        edited or deleted since it was sent is dropped."""
        items = self._inbox.take_guidance()
        taken = await steps.take_guidance(
            TakeGuidanceInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                item_ids=[item.id for item in items],
            )
        )
        return [item for item in items if item.id in taken.taken]

    # The pieces of a turn.

    async def _call_model(self, commit: TurnCommit | None) -> TakeTurnResult | ProviderFailure:
        """One turn's activity; retryable provider failures back off here, in the `retry`
        phase."""
        run = self._run
        assert self._current is not None
        request = ModelTurnInput(
            session_id=run.session_id,
            run_id=run.run_id,
            turn=self._turn,
            leaf_id=self._leaf,
            entry_id=self._current.assistant_id,
            snapshot=self._snapshot,
            commit=commit,
            override=self._override,
        )
        attempt = 1
        while True:
            try:
                return await self._ask(request, attempt)
            except ActivityError as err:
                if steps.cancelled(err):  # the run is being aborted
                    raise asyncio.CancelledError from err
                failure = steps.provider_failure(err)
            if not failure.retryable or attempt > run.options.provider_retries:
                return failure
            delay_ms = failure.retry_after_ms or int(
                run.options.provider_backoff_s * 1000 * 2 ** (attempt - 1)
            )
            retry = RetryScheduled(
                turn=self._turn, attempt=attempt, delay_ms=delay_ms, error=failure.message
            )
            await self._set_phase("retry", retry)
            await workflow.sleep(timedelta(milliseconds=delay_ms))
            await self._set_phase("turn")
            attempt += 1

    async def _ask(self, request: ModelTurnInput, attempt: int) -> TakeTurnResult:
        """The turn as one activity where the session's tools run: its host's queue, or
        this run's. The model call alone (its tool calls then activities of their own) in
        runs from before, when a gone host does not take the turn in time (its calls then
        wait for the host), and when a worker of an older build took it (an upgrade)."""
        options = self._run.options
        if workflow.patched(ONE_ACTIVITY_PATCH):
            host = self._host
            queue = host_task_queue(workflow.info().task_queue, host) if host else None
            try:
                taken = await steps.take_turn(
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
                return taken
            except ActivityError as err:
                if not (queue and steps.not_taken(err)) and not steps.not_registered(err):
                    raise
        return TakeTurnResult(reply=await steps.model_turn(request, options, attempt))

    async def _run_tool(self, turn: TurnInProgress, call: ToolCallRef) -> ToolCallOutcome:
        if call.approval is not None and workflow.patched(PATCH):
            where = (self._turn, turn.assistant_id, self._now_ms())
            call = await self._approvals.wait(call, *where, self._approval_event)
        if call.traits.child_session and call.refused is None:  # delegate: a sub-agent
            return await run_subagent(self, turn, call)
        data = ToolCallInput(
            session_id=self._run.session_id,
            run_id=self._run.run_id,
            turn=self._turn,
            assistant_entry_id=turn.assistant_id,
            result_entry_id=turn.result_id(call.id),
            call=call,
        )
        if self._host is not None and workflow.patched(hosts.PATCH):  # the session's host
            return await self._host_waits.run_tool(self, self._host, data, self._run.options)
        return await steps.run_tool(data, self._run.options)

    async def _approval_event(self, waiting: bool, event: RunEventPayload) -> None:
        """An approval event; the phase is `awaiting_approval` while any call waits."""
        phase: Phase = "awaiting_approval" if waiting else "turn"
        if phase != self._phase:
            await self._set_phase(phase, event)
            return
        await steps.record_events(
            RecordEventsInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                key=f"{self._run.run_id}/approval/{self._new_id()}",
                events=[event],
            )
        )

    def _summary(
        self, reply: ModelTurnResult, calls: list[ToolCallRef], outcomes: list[ToolRun]
    ) -> TurnSummary:
        return TurnSummary(
            turn=self._turn,
            model=self._snapshot.model,
            stop_reason=reply.stop_reason,
            text_preview=reply.text_preview,
            usage=reply.usage,
            run_usage=self._usage,
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

    def _turn_limit_reached(self) -> bool:
        limit = self._run.max_turns
        return limit is not None and self._turn >= limit


def _terminated(outcomes: list[ToolRun]) -> bool:
    """A tool's result asked the run to stop (afterToolCall's `terminate`)."""
    return any(isinstance(o, ToolCallOutcome) and o.terminate for o in outcomes)
