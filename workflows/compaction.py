"""Compaction as workflow steps: plan the cut, summarise, commit. Shared by the manual
`SessionCompaction` workflow and a run compacting itself (auto or on overflow).

Only the last step writes the session, so a crash anywhere leaves a whole compaction or
none; the summary call is an activity like any model call.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.compaction import CompactionSettings
    from duragent.domain.events import CompactionStarted
    from duragent.domain.runs import RunOptions
    from duragent.domain.tree_ops import (
        CommitCompactionInput,
        CompactResult,
        PlanCompactionInput,
        SummarizeInput,
    )
    from duragent.domain.turns import RecordEventsInput

from duragent.workflows import steps


async def compact(
    *,
    session_id: str,
    op_id: str,
    leaf_id: str | None,
    settings: CompactionSettings,
    options: RunOptions,
    reason: str,
    instructions: str | None = None,
    on_summary: Callable[[str], None] | None = None,
) -> CompactResult:
    """Compact the path ending at `leaf_id` (None: the session's leaf). `on_summary` is
    told the compaction entry's id before its summary is asked for: a run stopped from
    then on may find the summary stored, its model call to be counted (`Run.abort`)."""
    planned = await steps.plan_compaction(
        PlanCompactionInput(
            session_id=session_id,
            leaf_id=leaf_id,
            keep_recent_tokens=settings.keep_recent_tokens,
        )
    )
    plan = planned.plan
    if plan is None:
        return CompactResult(
            compacted=False,
            reason=f"nothing to compact: the context is within the last "
            f"{settings.keep_recent_tokens} tokens kept",
        )
    entry_id = workflow.uuid4().hex
    if on_summary is not None:
        on_summary(entry_id)
    await steps.record_events(
        RecordEventsInput(
            session_id=session_id,
            run_id=op_id,
            key=f"{op_id}/compaction/{entry_id}",
            events=[CompactionStarted(reason=reason, tokens_before=plan.tokens_before)],
        )
    )
    summary = await steps.summarize(
        SummarizeInput(
            session_id=session_id,
            op_id=op_id,
            entry_id=entry_id,
            kind="compaction",
            model=planned.model,
            entry_ids=plan.summarized_ids,
            split_turn_ids=plan.split_turn_ids,
            previous_summary_entry_id=plan.previous_summary_entry_id,
            instructions=instructions,
            max_tokens=settings.summary_max_tokens,
        ),
        options,
    )
    await steps.commit_compaction(
        CommitCompactionInput(
            session_id=session_id, op_id=op_id, entry_id=entry_id, plan=plan, reason=reason
        )
    )
    return CompactResult(
        compacted=True,
        entry_id=entry_id,
        tokens_before=plan.tokens_before,
        usage=summary.usage,
        cost=summary.cost,
    )
