"""Runtime guidance at the loop's safe points (docs/SPEC.md, runtime guidance): taken
only if the store still lets this run take it (compare-and-set), then injected into the
commit that starts the next model call, where the turn ended (`domain.injection`).

The loop (`workflows.loop`) asks here before a model call (`guided` at `before_model`),
before a turn's calls start (`replan`, or `replanned` with what the turn's activity
took), and after its calls (`after_calls`).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.guidance import GuidanceItem, InjectionPoint
    from duragent.domain.injection import inject, inject_replan, injection_point
    from duragent.domain.save_points import TurnCommit
    from duragent.domain.turn_in_progress import TurnInProgress
    from duragent.domain.turns import TakeGuidanceInput

from duragent.workflows import steps
from duragent.workflows.run import Run
from duragent.workflows.tool_batch import BatchResult


async def after_calls(
    run: Run,
    commit: TurnCommit,
    turn: TurnInProgress,
    batch: BatchResult,
    taken: list[GuidanceItem],
) -> TurnCommit | None:
    """`commit` with the guidance pending after `turn`'s tool calls (`taken` by its
    activity while they ran, or sent meanwhile), if any is taken."""
    if not (taken or run.state.inbox.guidance):
        return None
    arrived = (
        "tools"
        if taken
        else run.state.inbox.arrivals.get(run.state.inbox.guidance[0].id, "between")
    )
    point = injection_point(arrived, bool(turn.calls), bool(batch.interrupted), bool(batch.skipped))
    return await guided(run, commit, point, batch.interrupted, batch.skipped, taken)


async def guided(
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


async def replan(run: Run, turn: TurnInProgress) -> TurnCommit | None:
    """before_tools: answer every planned call as not run, then inject the guidance."""
    items = await _take_guidance(run)
    if not items:
        return None
    return replanned(run, turn, items)


def replanned(run: Run, turn: TurnInProgress, items: list[GuidanceItem]) -> TurnCommit:
    """The commit of a turn whose planned calls `items` kept from running: the model
    re-plans with them."""
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
