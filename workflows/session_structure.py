"""Structural operations on an idle session: compaction and tree navigation (docs/SPEC.md).

Each runs under the session's workflow id, so Temporal refuses them while a run (or any
other operation) is open, whichever client or machine asks.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.runs import RunOptions
    from duragent.domain.tree_ops import (
        CommitNavigationInput,
        CompactInput,
        CompactResult,
        NavigateInput,
        NavigateResult,
        SummarizeInput,
    )

from duragent.workflows import steps
from duragent.workflows.compaction import compact


@workflow.defn(name="SessionCompaction")
class SessionCompaction:
    def __init__(self) -> None:
        self._phase = "compaction"

    @workflow.query
    def phase(self) -> str:
        return self._phase

    @workflow.run
    async def run(self, data: CompactInput) -> CompactResult:
        return await compact(
            session_id=data.session_id,
            op_id=data.op_id,
            leaf_id=None,
            settings=data.settings,
            options=RunOptions(),
            reason="manual",
            instructions=data.instructions,
        )


@workflow.defn(name="SessionNavigation")
class SessionNavigation:
    def __init__(self) -> None:
        self._phase = "branch_summary"

    @workflow.query
    def phase(self) -> str:
        return self._phase

    @workflow.run
    async def run(self, data: NavigateInput) -> NavigateResult:
        plan = await steps.plan_navigation(data)
        summary_id = None
        if data.summarize and plan.abandoned_ids:
            summary_id = workflow.uuid4().hex
            await steps.summarize(
                SummarizeInput(
                    session_id=data.session_id,
                    op_id=data.op_id,
                    entry_id=summary_id,
                    kind="branch",
                    model=plan.model,
                    entry_ids=plan.abandoned_ids,
                    instructions=data.instructions,
                ),
                RunOptions(),
            )
        leaf = await steps.commit_navigation(
            CommitNavigationInput(
                session_id=data.session_id,
                op_id=data.op_id,
                plan=plan,
                target_entry_id=data.target_entry_id,
                marker_id=workflow.uuid4().hex,
                summary_entry_id=summary_id,
            )
        )
        return NavigateResult(leaf_id=leaf, edit_text=plan.edit_text, summary_entry_id=summary_id)
