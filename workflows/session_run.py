"""The agent loop (seed 000's runLoop) as a Temporal workflow: one run of a session.

    start run -> [ model turn -> tool calls -> save point ]* -> finish run

Each model turn and each tool call is an activity; the store writes between them are
local activities. Activities exchange references and small results with this code, so
the workflow history grows with the new content of each turn, not with the context.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from domain.config import SnapshotRef
    from domain.events import PhaseChanged, RetryScheduled, RunEventPayload
    from domain.messages import AssistantMessage, TextContent, ToolResultMessage, Usage
    from domain.runs import Phase, RunInput, RunResult, RunStatus, session_workflow_id
    from domain.tools import ToolCallRef
    from domain.turns import (
        CommitSlot,
        FinishRunInput,
        ModelTurnInput,
        ModelTurnResult,
        ProviderFailure,
        RecordEventsInput,
        StartRunInput,
        ToolCallInput,
        ToolCallOutcome,
        TurnCommit,
    )

from workflows import steps
from workflows.tool_batch import ToolRun, run_tool_calls


@workflow.defn(name="SessionRun")
class SessionRun:
    def __init__(self) -> None:
        self._phase: Phase = "idle"
        self._turn = 0

    @workflow.query
    def phase(self) -> Phase:
        return self._phase

    @workflow.query
    def turn(self) -> int:
        return self._turn

    @workflow.run
    async def run(self, run: RunInput) -> RunResult:
        self._run = run
        self._phase = "turn"
        started = await steps.start_run(
            StartRunInput(
                session_id=run.session_id,
                run_id=run.run_id,
                workflow_id=session_workflow_id(run.session_id),
                kind=run.kind,
                prompt=run.prompt,
                prompt_entry_ids=[self._new_id() for _ in run.prompt],
            )
        )
        leaf, snapshot = started.leaf_id, started.snapshot
        usage, error = Usage(), None
        status: RunStatus = "completed"
        commit: TurnCommit | None = None
        while True:
            self._turn += 1
            assistant_id = self._new_id()
            reply = await self._call_model(leaf, assistant_id, snapshot, commit)
            if commit is not None:  # the model activity saved the previous turn first
                leaf = commit.leaf_after(leaf)
            if isinstance(reply, ModelTurnResult):
                usage = usage.plus(reply.usage)
                snapshot, calls = reply.snapshot or snapshot, reply.tool_calls
                result_ids = [self._new_id() for _ in calls]
                outcomes = await run_tool_calls(
                    calls,
                    partial(
                        self._run_tool,
                        assistant_id,
                        dict(zip((c.id for c in calls), result_ids, strict=True)),
                    ),
                )
                slots = [
                    CommitSlot(entry_id=assistant_id),
                    *self._result_slots(calls, result_ids, outcomes),
                ]
            else:
                status, error, calls = "error", reply.message, []
                slots = [
                    CommitSlot(entry_id=assistant_id, fallback=self._error_reply(reply, snapshot))
                ]
            stop = status == "error" or not calls or self._turn_limit_reached()
            commit = TurnCommit(turn=self._turn, slots=slots, usage=usage, continues=not stop)
            if stop:
                break
        return await self._finish(leaf, commit, status, error, usage, assistant_id)

    async def _call_model(
        self, leaf: str, entry_id: str, snapshot: SnapshotRef, commit: TurnCommit | None
    ) -> ModelTurnResult | ProviderFailure:
        """One model turn; retryable provider failures back off here, in the `retry` phase."""
        run = self._run
        request = ModelTurnInput(
            session_id=run.session_id,
            run_id=run.run_id,
            turn=self._turn,
            leaf_id=leaf,
            entry_id=entry_id,
            snapshot=snapshot,
            commit=commit,
        )
        attempt = 1
        while True:
            try:
                return await steps.model_turn(request, run.options, attempt)
            except ActivityError as err:
                failure = _provider_failure(err)
            if not failure.retryable or attempt > run.options.provider_retries:
                return failure
            delay_ms = failure.retry_after_ms or int(
                run.options.provider_backoff_s * 1000 * 2 ** (attempt - 1)
            )
            await self._set_phase(
                "retry",
                RetryScheduled(
                    turn=self._turn, attempt=attempt, delay_ms=delay_ms, error=failure.message
                ),
            )
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

    def _result_slots(
        self, calls: list[ToolCallRef], result_ids: list[str], outcomes: list[ToolRun]
    ) -> list[CommitSlot]:
        slots = []
        for call, result_id, outcome in zip(calls, result_ids, outcomes, strict=True):
            if isinstance(outcome, ToolCallOutcome):
                slots.append(CommitSlot(entry_id=result_id))
            else:
                # The activity gave up (its retries are spent): the model still gets a
                # result for the call, saying what went wrong.
                slots.append(
                    CommitSlot(
                        entry_id=result_id,
                        fallback=ToolResultMessage(
                            tool_call_id=call.id,
                            tool_name=call.name,
                            content=[
                                TextContent(text=f"The tool call failed: {_root_message(outcome)}")
                            ],
                            is_error=True,
                            timestamp=self._now_ms(),
                        ),
                    )
                )
        return slots

    def _error_reply(self, failure: ProviderFailure, snapshot: SnapshotRef) -> AssistantMessage:
        return AssistantMessage(
            model=snapshot.model,
            provider="anthropic",
            stop_reason="error",
            error_message=failure.message,
            timestamp=self._now_ms(),
        )

    def _turn_limit_reached(self) -> bool:
        limit = self._run.max_turns
        return limit is not None and self._turn >= limit

    async def _finish(
        self,
        leaf: str,
        commit: TurnCommit,
        status: RunStatus,
        error: str | None,
        usage: Usage,
        last_assistant_id: str | None,
    ) -> RunResult:
        run = self._run
        finished = await steps.finish_run(
            FinishRunInput(
                session_id=run.session_id,
                run_id=run.run_id,
                status=status,
                turns=self._turn,
                usage=usage,
                error=error,
                parent_id=leaf,
                commit=commit,
                last_assistant_entry_id=last_assistant_id,
            )
        )
        self._phase = "idle"
        return RunResult(
            session_id=run.session_id,
            run_id=run.run_id,
            status=status,
            turns=self._turn,
            usage=usage,
            error=error,
            leaf_id=finished.leaf_id,
            final_text=finished.final_text,
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


def _root_message(err: BaseException) -> str:
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err) or type(err).__name__
