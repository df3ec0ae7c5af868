"""The agent loop (seed 000's runLoop) as a Temporal workflow: one run of a session.

    start run -> [ model turn -> tool calls -> drain steering ]* -> follow-ups? -> finish

Each model turn and each tool call is an activity; the save point of a turn rides on the
next model call (or on finish). Activities exchange references and small results with
this code, so the workflow history grows with each turn's new content, not the context.
Steering, follow-ups and config changes arrive as signals; abort is cancellation.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from functools import partial
from typing import Literal, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from domain.changes import SessionChange
    from domain.compaction import CHARS_PER_TOKEN, context_window_of
    from domain.config import SnapshotRef
    from domain.entries import CustomMessageEntry, SessionEntry
    from domain.events import (
        ContinuedAsNew,
        PhaseChanged,
        RetryScheduled,
        RunEventPayload,
        RuntimeGuidanceInjected,
        RuntimeGuidanceReplanBeforeTools,
    )
    from domain.guidance import GuidanceItem, InjectionPoint, guidance_entry
    from domain.hooks import NextTurn, ToolOutcomeSummary, TurnSummary
    from domain.messages import AssistantMessage, TextContent, ToolResultMessage, Usage
    from domain.queues import QueuedMessage
    from domain.runs import (
        CarriedState,
        Phase,
        RunInput,
        RunResult,
        RunStatus,
        RunView,
        session_workflow_id,
    )
    from domain.tools import ToolCallRef
    from domain.tree_ops import CompactResult, SaveTurnInput
    from domain.turns import (
        CommitSlot,
        FinishRunInput,
        ModelTurnInput,
        ModelTurnResult,
        ProviderFailure,
        RecordEventsInput,
        StartRunInput,
        TakeGuidanceInput,
        ToolCallInput,
        ToolCallOutcome,
        TurnCommit,
    )

from workflows import steps
from workflows.compaction import compact
from workflows.hook_runner import HookError, HookRunner
from workflows.inbox import Inbox, queued_entries
from workflows.tool_batch import BatchResult, Skipped, ToolRun, run_tool_calls

# Below Temporal's suggestion (4,096 events, 4 MB) by more than a turn's worth, so every
# execution's history stays under it.
CONTINUE_AT_EVENTS = 3_500
CONTINUE_AT_BYTES = 3_500_000

ABORT_NOTE = (
    "The user aborted the run here. Tool calls that had not finished were stopped; "
    "their results say so. Do not assume they completed."
)


@workflow.defn(name="SessionRun")
class SessionRun:
    _run: RunInput

    def __init__(self) -> None:
        self._phase: Phase = "idle"
        self._turn = 0
        self._inbox = Inbox()
        self._run_id = ""
        # What an abort must save: the committed leaf, turns handed to an activity but
        # not yet known saved, and the turn in progress.
        self._leaf = ""
        self._unsaved: list[TurnCommit] = []
        self._current: tuple[str, list[ToolCallRef], list[str]] | None = None
        self._usage = Usage()
        self._first_turn = 0
        self._executions = 1
        self._hook_paths: list[str] = []
        self._last_assistant: str | None = None

    # Signals and queries: clients steer the run; none of these need the run idle.

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
        """Runtime guidance: taken at the nearest safe point (seed 001)."""
        self._inbox.guide(item)

    @workflow.signal
    def change(self, change: SessionChange) -> None:
        """Config setters and session writes: pending until the next save point."""
        self._inbox.change(change)

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
            pending_writes=self._inbox.pending_writes,
            guidance=self._inbox.guidance,
        )

    # The run.

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        self._run, self._run_id, self._phase = run, run.run_id, "turn"
        try:
            return await self._loop(run)
        except asyncio.CancelledError:
            return await self._abort()

    async def _loop(self, run: RunInput) -> RunResult:
        if run.carried is not None:
            snapshot, hooks, override = self._restore(run.carried)
        else:
            started = await self._start(run)
            if isinstance(started, RunResult):
                return started
            snapshot, hooks = started
            override = None
        commit: TurnCommit | None = None
        while True:
            if commit is None:  # input that queued up before this model call
                commit = await self._waiting_input()
            self._turn += 1
            assistant_id = self._new_id()
            self._current = (assistant_id, [], [])
            reply = await self._model_turn(snapshot, commit, override)
            commit = None
            if isinstance(reply, ProviderFailure):
                slot = CommitSlot(
                    entry_id=assistant_id, fallback=self._error_reply(reply, snapshot)
                )
                commit = self._commit([slot], continues=False)
                return await self._finish([commit], "error", reply.message, assistant_id)
            self._usage = self._usage.plus(reply.usage)
            self._last_assistant = assistant_id
            snapshot = reply.snapshot or snapshot
            calls, result_ids = reply.tool_calls, [self._new_id() for _ in reply.tool_calls]
            self._current = (assistant_id, calls, result_ids)
            if calls and self._inbox.guidance:
                # Seed 001's before_tools: the plan is answered, not run; the model
                # re-plans with the guidance.
                commit = await self._replan(assistant_id, calls, result_ids)
                if commit is not None:
                    continue
            ids = dict(zip([c.id for c in calls], result_ids, strict=True))
            run_one = partial(self._run_tool, assistant_id, ids)
            self._inbox.activity = "tools"
            batch = await run_tool_calls(calls, run_one, self._inbox.guidance_intent)
            self._inbox.activity = "between"
            outcomes = batch.outcomes
            slots = [
                CommitSlot(entry_id=assistant_id),
                *self._result_slots(calls, result_ids, outcomes),
            ]
            summary = self._summary(reply, snapshot, calls, outcomes)
            try:
                stop = hooks.should_stop_after_turn(summary) or self._terminated(outcomes)
                override = None if stop else hooks.prepare_next_turn(summary)
            except HookError as err:
                commit = self._commit(slots, continues=False)
                return await self._finish([commit], "error", str(err), assistant_id)
            stop = stop or self._turn_limit_reached()
            # Steering waits for every call of the turn; follow-ups for the agent to stop.
            queued = [] if stop else self._inbox.take_steering()
            queue: Literal["steering", "follow_up"] = "steering"
            if not stop and not calls and not queued:
                queued, queue = self._inbox.take_follow_ups(), "follow_up"
            commit = self._commit(slots, continues=True, queued=queued, queue=queue)
            guided = False
            if not stop and self._inbox.guidance:
                unguided = commit
                point = self._point(bool(calls), batch)
                commit = await self._guided(commit, point, batch.interrupted, batch.skipped)
                guided = commit is not unguided
            stop = stop or (not calls and not queued and not guided)
            self._current = None
            if stop:
                commit = commit.model_copy(update={"continues": False})
                return await self._finish([commit], "completed", None, assistant_id)
            if self._context_nearly_full(reply, outcomes, snapshot):
                await self._save(commit)
                commit = None
                await self._compact("auto")
            if self._time_to_continue_as_new():
                if commit is not None:
                    await self._save(commit)
                await self._continue_as_new(snapshot, hooks, override)

    async def _waiting_input(self) -> TurnCommit | None:
        """Steering, guidance and writes that arrived when no turn could take them (at
        the start, during a compaction): a commit of their own, ahead of the model call."""
        queued = self._inbox.take_steering()
        if not (queued or self._inbox.guidance or self._inbox.pending_writes):
            return None
        commit = self._commit([], continues=True, queued=queued)
        if self._inbox.guidance:
            commit = await self._guided(commit, "before_model")
        return commit

    async def _start(self, run: RunInput) -> tuple[SnapshotRef, HookRunner] | RunResult:
        """Record the run and its prompt; the first snapshot and the workflow hooks."""
        try:
            started = await steps.start_run(
                StartRunInput(
                    session_id=run.session_id,
                    run_id=run.run_id,
                    workflow_id=session_workflow_id(run.session_id),
                    kind=run.kind,
                    prompt=run.prompt,
                    invocation=run.invocation,
                    prompt_entry_ids=[self._new_id() for _ in range(max(1, len(run.prompt)))],
                    timestamp=self._now_ms(),
                )
            )
        except FailureError as err:  # e.g. a skill that does not exist
            if _cancelled(err):
                raise asyncio.CancelledError from err
            return await self._finish([], "error", _root_message(err), None)
        self._leaf = started.leaf_id
        self._inbox.config = self._inbox.config or started.config
        self._hook_paths = started.workflow_hooks
        try:
            return started.snapshot, HookRunner(started.workflow_hooks)
        except HookError as err:
            return await self._finish([], "error", str(err), None)

    def _restore(self, carried: CarriedState) -> tuple[SnapshotRef, HookRunner, NextTurn | None]:
        """Pick the run up where its previous execution continued as new."""
        self._turn, self._first_turn = carried.turn, carried.turn
        self._leaf, self._usage = carried.leaf_id, carried.usage
        self._last_assistant = carried.last_assistant_id
        self._executions = carried.executions
        self._hook_paths = carried.hooks
        self._inbox = Inbox.restore(carried.inbox)
        return carried.snapshot, HookRunner(carried.hooks), carried.override

    async def _model_turn(
        self, snapshot: SnapshotRef, commit: TurnCommit | None, override: NextTurn | None
    ) -> ModelTurnResult | ProviderFailure:
        """The model call (which saves `commit` first); a context the provider refuses as
        too long is compacted and the call tried once more."""
        self._unsaved = [commit] if commit else []
        self._inbox.activity = "model"
        reply = await self._call_model(snapshot, commit, override)
        if commit is not None:  # the model activity saved the previous turn first
            self._leaf, self._unsaved = commit.leaf_after(self._leaf), []
        overflow = isinstance(reply, ProviderFailure) and reply.kind == "context_overflow"
        compacted = overflow and self._run.options.compaction.enabled
        if compacted and (await self._compact("overflow")).compacted:
            reply = await self._call_model(snapshot, None, override)
        self._inbox.activity = "between"
        return reply

    def _context_nearly_full(
        self, reply: ModelTurnResult, outcomes: list[ToolRun], snapshot: SnapshotRef
    ) -> bool:
        """Auto-compaction (checked at every save point): the last call's reported tokens
        plus about a token per four characters of what the turn added."""
        settings = self._run.options.compaction
        if not settings.enabled:
            return False
        window = settings.context_window or context_window_of(snapshot.model)
        added = sum(o.content_chars for o in outcomes if isinstance(o, ToolCallOutcome))
        tokens = reply.usage.total_tokens + added // CHARS_PER_TOKEN
        return tokens > window - settings.reserve_tokens

    async def _compact(self, reason: str) -> CompactResult:
        await self._set_phase("compaction")
        result = await compact(
            session_id=self._run.session_id,
            op_id=self._run.run_id,
            leaf_id=self._leaf,
            settings=self._run.options.compaction,
            options=self._run.options,
            reason=reason,
        )
        if result.compacted and result.entry_id:
            self._leaf = result.entry_id
        await self._set_phase("turn")
        return result

    async def _save(self, commit: TurnCommit) -> None:
        """A save point on its own, for when no model call follows at once."""
        self._unsaved = [commit]
        await steps.save_turn(
            SaveTurnInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                parent_id=self._leaf,
                commit=commit,
            )
        )
        self._leaf, self._unsaved = commit.leaf_after(self._leaf), []

    def _time_to_continue_as_new(self) -> bool:
        """Before Temporal would suggest it (4,096 events or 4 MB), or after the
        configured number of turns in this execution."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= CONTINUE_AT_EVENTS
            or info.get_current_history_size() >= CONTINUE_AT_BYTES
            or self._turn - self._first_turn >= self._run.options.continue_as_new_after_turns
        )

    async def _continue_as_new(
        self, snapshot: SnapshotRef, hooks: HookRunner, override: NextTurn | None
    ) -> NoReturn:
        """Hand the run to a fresh execution at this quiet boundary: the turn is saved,
        no tool runs, no handler is mid-way; queues and config travel with it."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        info = workflow.info()
        await steps.record_events(
            RecordEventsInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                key=f"{self._run.run_id}/continued/{self._turn}",
                events=[
                    ContinuedAsNew(
                        turn=self._turn,
                        history_events=info.get_current_history_length(),
                        history_bytes=info.get_current_history_size(),
                    )
                ],
            )
        )
        carried = CarriedState(
            turn=self._turn,
            leaf_id=self._leaf,
            snapshot=snapshot,
            usage=self._usage,
            hooks=self._hook_paths,
            override=override,
            last_assistant_id=self._last_assistant,
            executions=self._executions + 1,
            inbox=self._inbox.export(),
        )
        workflow.continue_as_new(self._run.model_copy(update={"carried": carried}))

    async def _guided(
        self,
        commit: TurnCommit,
        point: InjectionPoint,
        interrupted: list[str] | None = None,
        skipped: list[str] | None = None,
    ) -> TurnCommit:
        """`commit` with the pending guidance the store still lets this run take."""
        items = await self._take_guidance()
        if not items:
            return commit
        entries = [guidance_entry(item, point, self._now_ms()) for item in items]
        event = RuntimeGuidanceInjected(
            point=point,
            turn=self._turn + 1,
            item_ids=[item.id for item in items],
            interrupted=interrupted or [],
            skipped=skipped or [],
        )
        return commit.model_copy(
            update={"entries": [*commit.entries, *entries], "events": [*commit.events, event]}
        )

    async def _replan(
        self, assistant_id: str, calls: list[ToolCallRef], result_ids: list[str]
    ) -> TurnCommit | None:
        """before_tools: answer every planned call as not run, then inject the guidance."""
        items = await self._take_guidance()
        if not items:
            return None
        skipped = [call.id for call in calls]
        slots = [
            CommitSlot(entry_id=assistant_id),
            *(
                CommitSlot(entry_id=result_id, fallback=self._replanned(call))
                for call, result_id in zip(calls, result_ids, strict=True)
            ),
        ]
        ids = [item.id for item in items]
        events: list[RunEventPayload] = [
            RuntimeGuidanceReplanBeforeTools(turn=self._turn, item_ids=ids, skipped=skipped),
            RuntimeGuidanceInjected(point="before_tools", turn=self._turn + 1, item_ids=ids),
        ]
        entries = [guidance_entry(item, "before_tools", self._now_ms()) for item in items]
        commit = self._commit(slots, continues=True, queued=self._inbox.take_steering())
        return commit.model_copy(
            update={"entries": [*commit.entries, *entries], "events": [*commit.events, *events]}
        )

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

    def _point(self, had_calls: bool, batch: BatchResult) -> InjectionPoint:
        """Which of seed 001's injection points the pending guidance takes."""
        arrived = self._inbox.arrivals.get(self._inbox.guidance[0].id, "between")
        if batch.interrupted:
            return "during_tool_interrupted"
        if arrived == "tools" or batch.skipped:
            return "after_tool"
        if arrived == "model" and not had_calls:
            return "before_finish"
        return "before_model"

    def _replanned(self, call: ToolCallRef) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[
                TextContent(
                    text="Not run: the user sent guidance before this call started. "
                    "Re-plan with the guidance in mind."
                )
            ],
            details={"runtime_guidance_replan": True},
            is_error=False,
            timestamp=self._now_ms(),
        )

    async def _call_model(
        self, snapshot: SnapshotRef, commit: TurnCommit | None, override: NextTurn | None
    ) -> ModelTurnResult | ProviderFailure:
        """One model turn; retryable provider failures back off here, in the `retry` phase."""
        run = self._run
        assert self._current is not None
        request = ModelTurnInput(
            session_id=run.session_id,
            run_id=run.run_id,
            turn=self._turn,
            leaf_id=self._leaf,
            entry_id=self._current[0],
            snapshot=snapshot,
            commit=commit,
            override=override,
        )
        attempt = 1
        while True:
            try:
                return await steps.model_turn(request, run.options, attempt)
            except ActivityError as err:
                if _cancelled(err):  # the run is being aborted
                    raise asyncio.CancelledError from err
                failure = _provider_failure(err)
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

    async def _run_tool(
        self, assistant_id: str, result_ids: dict[str, str], call: ToolCallRef
    ) -> ToolCallOutcome:
        return await steps.run_tool(
            ToolCallInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                turn=self._turn,
                assistant_entry_id=assistant_id,
                result_entry_id=result_ids[call.id],
                call=call,
            ),
            self._run.options,
        )

    def _commit(
        self,
        slots: list[CommitSlot],
        *,
        continues: bool,
        queued: list[QueuedMessage] | None = None,
        queue: Literal["steering", "follow_up"] = "steering",
        extra: list[SessionEntry] | None = None,
    ) -> TurnCommit:
        """The finished turn: its messages, pending writes, then the queued messages that
        start the next turn."""
        writes, session_config = self._inbox.take_writes()
        entries, consumed = queued_entries(queued or [], queue)
        return TurnCommit(
            turn=self._turn,
            slots=slots,
            entries=[*writes, *(extra or []), *entries],
            usage=self._usage,
            continues=continues,
            session_config=session_config,
            consumed=consumed,
        )

    def _result_slots(
        self, calls: list[ToolCallRef], result_ids: list[str], outcomes: list[ToolRun]
    ) -> list[CommitSlot]:
        slots = []
        for call, result_id, outcome in zip(calls, result_ids, outcomes, strict=True):
            fallback = None
            if isinstance(outcome, Skipped):
                text = "Not run: the user sent guidance while earlier calls of this turn ran."
                fallback = self._tool_error(call, text)
            elif isinstance(outcome, asyncio.CancelledError):
                text = "Stopped because the user sent guidance while it ran."
                fallback = self._tool_error(call, text)
            elif not isinstance(outcome, ToolCallOutcome):
                # The activity gave up (its retries are spent): the model still gets a
                # result for the call, saying what went wrong.
                fallback = self._tool_error(call, f"The tool call failed: {_root_message(outcome)}")
            slots.append(CommitSlot(entry_id=result_id, fallback=fallback))
        return slots

    def _summary(
        self,
        reply: ModelTurnResult,
        snapshot: SnapshotRef,
        calls: list[ToolCallRef],
        outcomes: list[ToolRun],
    ) -> TurnSummary:
        return TurnSummary(
            turn=self._turn,
            model=snapshot.model,
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

    def _terminated(self, outcomes: list[ToolRun]) -> bool:
        """A tool's result asked the run to stop (afterToolCall's `terminate`)."""
        return any(isinstance(o, ToolCallOutcome) and o.terminate for o in outcomes)

    def _turn_limit_reached(self) -> bool:
        limit = self._run.max_turns
        return limit is not None and self._turn >= limit

    async def _abort(self) -> RunResult:
        """Save what the aborted turn produced, mark the abort for the model, drop the
        queues (returned to the caller), and end the run as aborted."""
        if not self._leaf:  # aborted before the run started: nothing of it is stored
            return await self._finish([], "aborted", None, None, cleared=self._inbox.clear_queues())
        commits = list(self._unsaved)
        marker = CustomMessageEntry(
            id=self._new_id(),
            parent_id=None,
            timestamp=self._now_ms(),
            custom_type="abort",
            content=[TextContent(text=ABORT_NOTE)],
        )
        steering, follow_ups = self._inbox.clear_queues()
        if self._current is not None:
            assistant_id, calls, result_ids = self._current
            aborted = AssistantMessage(
                stop_reason="aborted", error_message="aborted by the user", timestamp=self._now_ms()
            )
            slots = [
                CommitSlot(entry_id=assistant_id, fallback=aborted),
                *(
                    CommitSlot(
                        entry_id=result_id,
                        fallback=self._tool_error(call, "Aborted by the user before it finished."),
                    )
                    for call, result_id in zip(calls, result_ids, strict=True)
                ),
            ]
            commits.append(self._commit(slots, continues=False, extra=[marker]))
        else:
            commits.append(self._commit([], continues=False, extra=[marker]))
        return await self._finish(
            commits,
            "aborted",
            None,
            self._current[0] if self._current else None,
            cleared=(steering, follow_ups),
        )

    async def _finish(
        self,
        commits: list[TurnCommit],
        status: RunStatus,
        error: str | None,
        last_assistant_id: str | None,
        cleared: tuple[list[QueuedMessage], list[QueuedMessage]] | None = None,
    ) -> RunResult:
        run = self._run
        writes, session_config = self._inbox.take_writes()
        # Queued messages the run never reached wait for the session's next run, unless
        # the user aborted (then they go back to the caller).
        leftover = [] if cleared else [*self._inbox.steering, *self._inbox.follow_ups]
        finished = await steps.finish_run(
            FinishRunInput(
                session_id=run.session_id,
                run_id=run.run_id,
                status=status,
                turns=self._turn,
                usage=self._usage,
                error=error,
                parent_id=self._leaf,
                commits=commits,
                entries=writes,
                session_config=session_config,
                leftover=leftover,
                last_assistant_entry_id=last_assistant_id,
            )
        )
        self._phase = "idle"
        steering, follow_ups = cleared or ([], [])
        return RunResult(
            session_id=run.session_id,
            run_id=run.run_id,
            status=status,
            turns=self._turn,
            usage=self._usage,
            error=error,
            leaf_id=finished.leaf_id,
            final_text=finished.final_text,
            cleared_steering=[item.text for item in steering],
            cleared_follow_ups=[item.text for item in follow_ups],
            cancelled_inputs=finished.cancelled_inputs,
        )

    def _error_reply(self, failure: ProviderFailure, snapshot: SnapshotRef) -> AssistantMessage:
        return AssistantMessage(
            model=snapshot.model,
            provider="anthropic",
            stop_reason="error",
            error_message=failure.message,
            timestamp=self._now_ms(),
        )

    def _tool_error(self, call: ToolCallRef, text: str) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            is_error=True,
            timestamp=self._now_ms(),
        )

    async def _set_phase(self, phase: Phase, *events: RunEventPayload) -> None:
        self._phase = phase
        await steps.record_events(
            RecordEventsInput(
                session_id=self._run.session_id,
                run_id=self._run.run_id,
                key=f"{self._run.run_id}/phase/{self._new_id()}",
                events=[*events, PhaseChanged(phase=phase)],
                phase=phase,
            )
        )

    def _new_id(self) -> str:
        return workflow.uuid4().hex

    def _now_ms(self) -> int:
        return int(workflow.now().timestamp() * 1000)


def _provider_failure(err: ActivityError) -> ProviderFailure:
    """The provider failure an activity error carries, or a non-retryable stand-in."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == steps.PROVIDER_ERROR and cause.details:
        return ProviderFailure.model_validate(cause.details[0])
    return ProviderFailure(kind="other", status=None, message=_root_message(err), retryable=False)


def _cancelled(err: FailureError) -> bool:
    """The step failed because the run is being cancelled (aborted)."""
    return isinstance(err, CancelledError) or isinstance(err.cause, CancelledError)


def _root_message(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__
