"""A turn as one activity: the model's reply, then the tool calls it asks for.

Half the round trips of a model activity followed by one activity per call: the reply is
streamed and staged as `activities.model_turn` does it, then its calls run here, in
parallel where their tools allow, each as `activities.tool_call` runs one (its result
staged under an id fixed by the turn and the call: `result_entry_id`). The workflow gets
the reply and the calls' outcomes together and decides everything between turns.

- A call the workflow must decide on (an approval, a `delegate`, an `ask_user`) ends
  the activity after the reply, with no call run: the workflow runs the whole batch as
  before, so the batch keeps its parallelism and approvals and questions wait in the
  workflow.
- Runtime guidance (`activities.guidance_watch`) is taken here, with the workflow's
  compare-and-set: before any call starts, the calls are left unrun for a re-plan;
  while they run, an interrupting item is taken at once and stops the running calls
  (each stages what it printed) and skips the rest; a supplementing one is taken when
  the running calls have finished (its sender may edit or delete it until then) and
  skips the rest.
  The items go back to the workflow, which injects them where the turn ended.
- A retried attempt (its worker died) reuses the staged reply (the model is not asked
  twice), skips calls whose result is staged, reports an interrupted call that is not
  retry-safe and runs a retry-safe one again, as a retried tool activity does.
- Abort is the activity's cancellation: every running call is stopped and stages what
  it printed; finished results stay staged for the abort's save point. Cancelled while
  its calls run, the activity still returns their outcomes (for the history); the
  workflow, which asked for the cancel, aborts the run when it gets them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from temporalio import activity

from duragent.activities.guidance_watch import GuidanceWatch, RunGuidance
from duragent.activities.heartbeat import heartbeating
from duragent.activities.model_turn import ModelTurns
from duragent.activities.tool_call import ToolCalls, new_progress
from duragent.activities.worker_loss import unstick_after_retry
from duragent.domain.call_batches import run_batch
from duragent.domain.guidance import GuidanceItem
from duragent.domain.save_points import result_entry_id
from duragent.domain.tools import ToolCallRef
from duragent.domain.turns import (
    TAKE_TURN,
    ToolCallInput,
    ToolCallOutcome,
    TurnInput,
    TurnResult,
)
from duragent.store.statements import Tx

ON_CALL_ENDED: ContextVar[Callable[[ToolCallRef, ToolCallOutcome, int], None] | None] = ContextVar(
    "duragent_on_call_ended", default=None
)
"""Told of each call a turn's activity ran as it ends, with when it began (ns since the
epoch): how tracing makes a span per tool call (`telemetry.call_spans`)."""


def decided_in_workflow(call: ToolCallRef) -> bool:
    """A call the workflow must decide on before it runs: an approval, a sub-agent, a
    question for the user."""
    if call.refused is not None:
        return False
    return call.approval is not None or call.traits.child_session or call.question is not None


class TurnTaker:
    def __init__(self, models: ModelTurns, tools: ToolCalls, guidance: GuidanceWatch) -> None:
        self._models = models
        self._tools = tools
        self._guidance = guidance

    @activity.defn(name=TAKE_TURN)
    async def take_turn(self, data: TurnInput) -> TurnResult:
        info = activity.info()
        details = info.heartbeat_details
        earlier: dict[str, Any] = (
            details[0].get("calls", {}) if details and isinstance(details[0], dict) else {}
        )
        calls_progress: dict[str, dict[str, Any]] = {}
        # Heartbeats cover the whole turn, with what each call has done so far.
        async with heartbeating(lambda: {"calls": calls_progress}):
            await unstick_after_retry()
            began = time.monotonic()
            # Guidance sent before the calls start is read in the transaction that
            # stages the reply (not in one of its own), unless the reply was staged
            # before (an earlier attempt's): then it is read as the calls start.
            before: list[GuidanceItem] | None = None

            def read_guidance(db: Tx) -> None:
                nonlocal before
                before = self._guidance.pending_in(db, data.session_id, data.run_id)

            answer = await self._models.answer(data, with_calls=read_guidance)
            reply, another = answer.result, answer.raced
            model_ms = int((time.monotonic() - began) * 1000)
            calls = reply.tool_calls
            if not calls or any(decided_in_workflow(call) for call in calls):
                return TurnResult(reply=reply, model_ms=model_ms)
            # Calls may have begun only if another attempt got as far as the reply (an
            # earlier one, or one racing this one: a worker taken for lost and still at
            # work): then what is not staged and not retry-safe is reported, not run.
            attempt = max(info.attempt, 2) if another else 1

            async def run_one(call: ToolCallRef) -> ToolCallOutcome:
                began = time.time_ns()
                progress = calls_progress[call.id] = new_progress(attempt)
                request = ToolCallInput(
                    session_id=data.session_id,
                    run_id=data.run_id,
                    turn=data.turn,
                    assistant_entry_id=data.entry_id,
                    result_entry_id=result_entry_id(data.entry_id, call.id),
                    call=call,
                    deps=data.deps,
                )
                outcome = await self._tools.call(
                    request, earlier.get(call.id, {}), progress, answer.workspace
                )
                if (told := ON_CALL_ENDED.get()) is not None:
                    told(call, outcome, began)
                return outcome

            async with self._guidance.watching(data.session_id, data.run_id) as guidance:
                if before is None:
                    before = await self._guidance.read(guidance)
                else:
                    guidance.update(before)
                replan = await self._guidance.take(guidance, before) if before else []
                if replan:  # before any call started: the model re-plans with it
                    return TurnResult(
                        reply=reply, guidance=replan, replanned=True, model_ms=model_ms
                    )
                batch = await self._run_calls(calls, run_one, guidance)
        return TurnResult(
            reply=reply,
            outcomes=[batch.outcomes.get(call.id) for call in calls],
            interrupted=batch.interrupted,
            skipped=batch.skipped,
            guidance=batch.taken,
            model_ms=model_ms,
        )

    async def _run_calls(
        self,
        calls: Sequence[ToolCallRef],
        run_one: Callable[[ToolCallRef], Coroutine[Any, Any, ToolCallOutcome]],
        guidance: RunGuidance,
    ) -> _Batch:
        """Every call's outcome, by `domain.call_batches`' rules, with the guidance this
        activity takes from the store; a call that fails fails the turn (its retry skips
        what finished), unless the turn was aborted."""
        taken: list[GuidanceItem] = []

        async def until_done(running: set[asyncio.Task[Any]]) -> bool:
            return await self._until_done_or_interrupted(running, guidance, taken)

        async def ends_batch() -> bool:
            return bool(taken)  # guidance ended the batch: the rest is skipped

        ran = await run_batch(calls, run_one, until_done, ends_batch)
        outcomes: dict[str, ToolCallOutcome] = {}
        for call_id, outcome in ran.outcomes.items():
            if isinstance(outcome, ToolCallOutcome):
                outcomes[call_id] = outcome
            elif not isinstance(outcome, asyncio.CancelledError) and not ran.aborted:
                raise outcome  # the activity fails; its retry skips what finished
            # Stopped before it could stage a result: the workflow says it was stopped.
        return _Batch(outcomes, ran.interrupted, ran.skipped, taken)

    async def _until_done_or_interrupted(
        self,
        running: set[asyncio.Task[Any]],
        guidance: RunGuidance,
        taken: list[GuidanceItem],
    ) -> bool:
        """Wait for the group's calls; True if guidance that interrupts arrives meanwhile
        (taken at once, into `taken`). Guidance that supplements is taken once the calls
        have finished (until then its sender may still edit or delete it), and ends the
        batch there."""
        while True:
            pending = {t for t in running if not t.done()}
            if not pending:
                if guidance.pending:
                    taken += await self._guidance.take(guidance, list(guidance.pending))
                return False
            arrived = asyncio.create_task(guidance.interrupting.wait())
            try:
                await asyncio.wait({*pending, arrived}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                arrived.cancel()
            for task in running:
                failed = task.exception() if task.done() and not task.cancelled() else None
                if failed is not None:  # the activity fails; its retry skips what finished
                    raise failed
            if any(item.intent == "interrupt" for item in guidance.pending):
                items = await self._guidance.take(guidance, list(guidance.pending))
                taken += items
                if any(item.intent == "interrupt" for item in items):
                    return True


@dataclass
class _Batch:
    outcomes: dict[str, ToolCallOutcome]
    interrupted: list[str]
    skipped: list[str]
    taken: list[GuidanceItem]
    """Guidance this activity took while the calls ran, for the workflow to inject."""
