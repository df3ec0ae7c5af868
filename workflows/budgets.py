"""Budgets in the loop (domain.budgets): the counts a run keeps, and the check at its save
points, before each model call.

Only a run with a budget (its own, or its session's) reaches the check, and the check is
behind `workflow.patched(patches.BUDGETS)`: a run without one issues the commands it
always did.
When a limit is reached the run either stops there, its last turn saved with a note that
says which limit and what was spent (the model reads it in a later run), or it saves the
turn and waits for a person to raise the budget: the `raise_budget` update (or a new
session budget set meanwhile) lets it go on, an abort ends it as any abort does.

Costs come priced from the model activity (`ModelReply.cost`) and from sub-agents'
results (`RunResult.cost_usd`): the workflow never reads prices. What the session's other
runs spent is read once, by a local activity, at the first check with a session budget.
"""

from __future__ import annotations

from temporalio import workflow

from duragent.workflows import patches

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import (
        BUDGET_NOTE,
        Budget,
        Reached,
        SessionSpendInput,
        stop_text,
        stops,
        waiting_text,
    )
    from duragent.domain.entries import CustomMessageEntry
    from duragent.domain.events import BudgetRaised, BudgetReached
    from duragent.domain.messages import TextContent
    from duragent.domain.runs import RunResult
    from duragent.domain.save_points import TurnCommit

from duragent.workflows import steps
from duragent.workflows.run_state import RunSteps

"""Marks the histories of runs that checked a budget."""


async def budget_gate(
    run: RunSteps, pending: TurnCommit | None
) -> tuple[TurnCommit | None, RunResult | None]:
    """The check before a model call: (the commit still to save, None) to go on, or
    (None, the run's result) when a budget stopped it."""
    keeper, session_budget = run.state.budgets, run.session_budget()
    if not keeper.in_force(keeper.run_budget, session_budget) or not workflow.patched(
        patches.BUDGETS
    ):
        return pending, None
    while True:
        session_budget = run.session_budget()
        if session_budget is not None and session_budget.limited and keeper.session_before is None:
            keeper.session_before = await steps.session_spend(
                SessionSpendInput(session_id=run.state.input.session_id, run_id=run.state.run_id)
            )
        found = keeper.reached(run.spent(), session_budget)
        if not found:
            return pending, None
        if stops(found):
            return None, await _stop(run, pending, found)
        await _wait(run, pending, found)
        pending = None  # saved before the wait


async def _stop(run: RunSteps, pending: TurnCommit | None, found: list[Reached]) -> RunResult:
    """End the run at this save point: its last turn, then the note of what stopped it."""
    text = stop_text(found)
    now = run.now_ms()
    note = CustomMessageEntry(
        id=run.new_id(),
        parent_id=None,
        timestamp=now,
        custom_type=BUDGET_NOTE,
        content=[TextContent(text=text)],
    )
    events = [_reached_event(item, text, stopped=True) for item in found]
    if pending is None:
        commit = run.commit([], continues=False, extra=[note])
    else:
        commit = pending.model_copy(
            update={"continues": False, "entries": [*pending.entries, note]}
        )
    commit = commit.model_copy(update={"events": [*commit.events, *events]})
    run.state.current = None
    return await run.finish([commit], "completed", text, run.state.last_assistant)


async def _wait(run: RunSteps, pending: TurnCommit | None, found: list[Reached]) -> None:
    """Save the turn, then wait (phase `awaiting_budget`) until no limit is reached or
    one that stops is; an abort cancels the wait."""
    keeper = run.state.budgets
    if pending is not None:
        await run.save(pending)
    keeper.waiting = found
    text = waiting_text(found)
    await run.set_phase(
        "awaiting_budget", *(_reached_event(item, text, stopped=False) for item in found)
    )

    def changed() -> bool:
        now = keeper.reached(run.spent(), run.session_budget())
        return not now or stops(now)

    await workflow.wait_condition(changed)
    keeper.waiting = []
    scope, budget, by = keeper.raised or ("session", run.session_budget() or Budget(), None)
    keeper.raised = None
    raised = BudgetRaised(scope=scope, budget=budget.model_dump(exclude_none=True), by=by)
    await run.set_phase("turn", raised)


def _reached_event(item: Reached, text: str, *, stopped: bool) -> BudgetReached:
    return BudgetReached(
        scope=item.scope,
        limit=item.limit,
        allowed=item.allowed,
        spent=item.spent,
        stopped=stopped,
        message=text,
    )
