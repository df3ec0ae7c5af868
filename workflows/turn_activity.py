"""A turn's activity as the loop (`workflows.loop`) calls it: `take_turn` (the reply and
its tool calls) on the session's host's queue or this run's; the model call alone
(`model_turn`) where that cannot be; provider failures that may pass retried after a
back-off, in the `retry` phase; a context the provider refuses as too long compacted,
and the call tried once more. The activity saves the previous turn before it asks the
model (the save point: docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.events import RetryScheduled
    from duragent.domain.hosts import host_task_queue
    from duragent.domain.save_points import TurnCommit
    from duragent.domain.turns import ProviderFailure, TurnInput, TurnResult

from duragent.workflows import patches, steps
from duragent.workflows.run import Run


async def turn_activity(run: Run, commit: TurnCommit | None) -> TurnResult | ProviderFailure:
    """The turn's activity (which saves `commit` first); a context the provider refuses
    as too long is compacted and the call tried once more."""
    run.saving(commit)
    run.state.inbox.activity = "model"
    result = await _attempts(run, commit)
    if commit is not None:  # the activity saved the previous turn first
        run.saved(commit)
    overflow = isinstance(result, ProviderFailure) and result.kind == "context_overflow"
    compacted = overflow and run.state.input.options.compaction.enabled
    if compacted and (await run.compact("overflow")).compacted:
        result = await _attempts(run, None)
    run.state.inbox.activity = "between"
    return result


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
        deps=data.deps,
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
