"""executeToolCalls in the workflow, for a turn whose calls must wait here (an approval, a
sub-agent, a question for the user): the rules are `domain.call_batches`'; this says how
the workflow waits (`workflow.wait_condition`) and what guidance its signals brought
means for the batch. A failed call is its exception in the result; an abort stops every
running call and is raised once each has reported. `run_tool` is one call of such a
batch: its approval, a sub-agent, a question, or a tool activity; while people are waited
for, the run's phase says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.call_batches import run_batch
    from duragent.domain.events import QuestionAsked, RunEventPayload, ToolExecutionStart
    from duragent.domain.fallbacks import Skipped, ToolRun
    from duragent.domain.guidance import GuidanceIntent
    from duragent.domain.questions import ASK_USER_TOOL
    from duragent.domain.runs import Phase
    from duragent.domain.tools import ToolCallRef
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import ToolCallInput, ToolCallOutcome

from duragent.workflows import patches, steps
from duragent.workflows.run import Run
from duragent.workflows.subagents import run_subagent

__all__ = ["BatchResult", "Skipped", "ToolRun", "run_tool", "run_tool_calls"]


@dataclass
class BatchResult:
    outcomes: list[ToolRun]
    """One per call, in call order."""
    interrupted: list[str] = field(default_factory=list)
    """Ids of calls cancelled while running."""
    skipped: list[str] = field(default_factory=list)
    """Ids of calls that never started."""


async def run_tool_calls(
    calls: Sequence[ToolCallRef],
    run_one: Callable[[ToolCallRef], Coroutine[Any, Any, ToolCallOutcome]],
    guidance: Callable[[], GuidanceIntent | None] = lambda: None,
) -> BatchResult:
    """Every call's outcome; `guidance()`: the intent of the guidance waiting, if any."""

    async def until_done(running: set[asyncio.Task[Any]]) -> bool:
        await workflow.wait_condition(
            lambda: all(task.done() for task in running) or guidance() == "interrupt"
        )
        return guidance() == "interrupt"

    async def ends_batch() -> bool:
        return guidance() is not None

    batch = await run_batch(calls, run_one, until_done, ends_batch)
    if batch.aborted:  # every running call has reported: the abort is handled now
        raise asyncio.CancelledError
    return BatchResult(
        outcomes=[batch.outcomes.get(call.id, Skipped()) for call in calls],
        interrupted=batch.interrupted,
        skipped=batch.skipped,
    )


async def run_tool(run: Run, turn: TurnInProgress, call: ToolCallRef) -> ToolCallOutcome:
    """One call of `turn`, run here: its approval waited for first (if asked), then a
    `delegate` as a sub-agent, an `ask_user` as a question for the user, any other as a
    tool activity on the session's host (or the shared queue)."""
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
        deps=run.state.input.deps,
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
