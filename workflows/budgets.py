"""Budgets in the loop (domain.budgets): the counts a run keeps, and the check at its save
points, before each model call.

Only a run with a budget (its own, or its session's) reaches the check, and the check is
behind `workflow.patched(PATCH)`: a run without one issues the commands it always did.
When a limit is reached the run either stops there, its last turn saved with a note that
says which limit and what was spent (the model reads it in a later run), or it saves the
turn and waits for a person to raise the budget: the `raise_budget` update (or a new
session budget set meanwhile) lets it go on, an abort ends it as any abort does.

Costs come priced from the model activity (`ModelTurnResult.cost`) and from sub-agents'
results (`RunResult.cost_usd`): the workflow never reads prices. What the session's other
runs spent is read once, by a local activity, at the first check with a session budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import (
        BUDGET_NOTE,
        Budget,
        BudgetCarried,
        BudgetRaise,
        BudgetView,
        Reached,
        Scope,
        SessionSpendInput,
        Spent,
        raise_refusal,
        reached,
        remaining,
        stop_text,
        stops,
        tighter,
        waiting_text,
    )
    from duragent.domain.changes import ConfigChange, SessionChange
    from duragent.domain.cost import TurnCost
    from duragent.domain.entries import CustomMessageEntry
    from duragent.domain.events import BudgetRaised, BudgetReached
    from duragent.domain.messages import TextContent, Usage
    from duragent.domain.runs import RunInput, RunResult
    from duragent.domain.turns import TurnCommit

from duragent.workflows import steps

if TYPE_CHECKING:
    from duragent.workflows.run_base import RunBase

PATCH = "budgets"
"""Marks the histories of runs that checked a budget."""


class BudgetRefused(ValueError):
    """A raise the run cannot take: the update is rejected with this message."""


class BudgetKeeper:
    """A run's budget, what it has spent beyond turns and usage (which the run keeps),
    and the limits it waits on."""

    def __init__(self) -> None:
        self.run_budget: Budget | None = None
        self.started_ms = 0
        self.cost_usd = 0.0
        self.unpriced: list[str] = []
        self.session_before: Spent | None = None
        """What the session's other runs had spent (read at the first session check)."""
        self.waiting: list[Reached] = []
        self._raised: tuple[Scope, Budget, str | None] | None = None

    def begin(self, run: RunInput, now_ms: int) -> None:
        carried = run.carried.budget if run.carried else None
        if carried is None:
            self.run_budget, self.started_ms = run.budget, now_ms
            return
        self.run_budget, self.started_ms = carried.run_budget, carried.started_ms
        self.cost_usd, self.unpriced = carried.cost_usd, list(carried.unpriced_models)
        self.session_before = carried.session_before

    def export(self) -> BudgetCarried:
        return BudgetCarried(
            run_budget=self.run_budget,
            started_ms=self.started_ms,
            cost_usd=self.cost_usd,
            unpriced_models=self.unpriced,
            session_before=self.session_before,
        )

    def add_turn(self, cost: TurnCost | None) -> None:
        if cost is None:  # a worker that does not price turns
            return
        if cost.cost_usd is None:
            self._unpriced(cost.model or "(none)")
        else:
            self.cost_usd += cost.cost_usd

    def add_child(self, result: RunResult) -> None:
        """A sub-agent's cost counts toward this run's (its usage the run adds itself)."""
        self.cost_usd += result.cost_usd
        for model in result.unpriced_models:
            self._unpriced(model)

    def _unpriced(self, model: str) -> None:
        if model not in self.unpriced:
            self.unpriced.append(model)

    @staticmethod
    def in_force(run_budget: Budget | None, session_budget: Budget | None) -> bool:
        return any(b is not None and b.limited for b in (run_budget, session_budget))

    def run_spent(self, turns: int, usage: Usage, now_ms: int) -> Spent:
        return Spent(
            turns=turns,
            tokens=usage.total_tokens,
            cost_usd=self.cost_usd,
            wall_s=max(0, now_ms - self.started_ms) / 1000,
            unpriced_models=sorted(self.unpriced),
        )

    def session_spent(self, run_spent: Spent) -> Spent | None:
        return None if self.session_before is None else self.session_before.plus(run_spent)

    def reached(self, spent: Spent, session_budget: Budget | None) -> list[Reached]:
        found = reached(self.run_budget, spent, "run")
        session = self.session_spent(spent)
        if session is not None:
            found += reached(session_budget, session, "session")
        return found

    def view(self, spent: Spent, session_budget: Budget | None) -> BudgetView:
        return BudgetView(
            run_budget=self.run_budget,
            session_budget=session_budget,
            run_spent=spent,
            session_spent=self.session_spent(spent),
            # What is still reached: a raise answers before the waiting run wakes up.
            waiting=self.reached(spent, session_budget) if self.waiting else [],
        )

    def child_budget(self, spent: Spent, session_budget: Budget | None) -> Budget | None:
        """What a sub-agent may spend: what is left of this run's and its session's
        budgets, whichever is tighter; it stops when that is reached (a person raises the
        parent's budget, never a sub-agent's)."""
        if not self.in_force(self.run_budget, session_budget):
            return None
        session = self.session_spent(spent)
        left = remaining(self.run_budget, spent)
        if session is not None:
            left = tighter(left, remaining(session_budget, session))
        return left if left is not None and left.limited else None

    def check_raise(self, change: BudgetRaise, spent: Spent, session_budget: Budget | None) -> None:
        """`BudgetRefused` unless `change` raises the budget it names."""
        scope = self.scope_of(change)
        old = self.run_budget if scope == "run" else session_budget
        against = spent if scope == "run" else (self.session_spent(spent) or spent)
        refusal = raise_refusal(old, change.budget, against, scope)
        if refusal is not None:
            raise BudgetRefused(refusal)

    def scope_of(self, change: BudgetRaise) -> Scope:
        return change.scope or (self.waiting[0].scope if self.waiting else "run")

    def take_raise(
        self, change: BudgetRaise, change_id: str, timestamp: int
    ) -> SessionChange | None:
        """Apply a raise: the run's budget at once, or the session's as a config change
        (saved with the next save point, like any setter's)."""
        scope = self.scope_of(change)
        self._raised = (scope, change.budget, change.by)
        if scope == "run":
            self.run_budget = change.budget
            return None
        config = ConfigChange(budget=change.budget)
        return SessionChange(id=change_id, config=config, timestamp=timestamp)


async def budget_gate(
    run: RunBase, pending: TurnCommit | None
) -> tuple[TurnCommit | None, RunResult | None]:
    """The check before a model call: (the commit still to save, None) to go on, or
    (None, the run's result) when a budget stopped it."""
    keeper, session_budget = run._budgets, run._session_budget()
    if not keeper.in_force(keeper.run_budget, session_budget) or not workflow.patched(PATCH):
        return pending, None
    while True:
        session_budget = run._session_budget()
        if session_budget is not None and session_budget.limited and keeper.session_before is None:
            keeper.session_before = await steps.session_spend(
                SessionSpendInput(session_id=run._run.session_id, run_id=run._run.run_id)
            )
        found = keeper.reached(run._budget_spent(), session_budget)
        if not found:
            return pending, None
        if stops(found):
            return None, await _stop(run, pending, found)
        await _wait(run, pending, found)
        pending = None  # saved before the wait


async def _stop(run: RunBase, pending: TurnCommit | None, found: list[Reached]) -> RunResult:
    """End the run at this save point: its last turn, then the note of what stopped it."""
    text = stop_text(found)
    now = run._now_ms()
    note = CustomMessageEntry(
        id=run._new_id(),
        parent_id=None,
        timestamp=now,
        custom_type=BUDGET_NOTE,
        content=[TextContent(text=text)],
    )
    events = [_reached_event(item, text, stopped=True) for item in found]
    if pending is None:
        commit = run._commit([], continues=False, extra=[note])
    else:
        commit = pending.model_copy(
            update={"continues": False, "entries": [*pending.entries, note]}
        )
    commit = commit.model_copy(update={"events": [*commit.events, *events]})
    run._current = None
    return await run._finish([commit], "completed", text, run._last_assistant)


async def _wait(run: RunBase, pending: TurnCommit | None, found: list[Reached]) -> None:
    """Save the turn, then wait (phase `awaiting_budget`) until no limit is reached or
    one that stops is; an abort cancels the wait."""
    keeper = run._budgets
    if pending is not None:
        await run._save(pending)
    keeper.waiting = found
    text = waiting_text(found)
    await run._set_phase(
        "awaiting_budget", *(_reached_event(item, text, stopped=False) for item in found)
    )

    def changed() -> bool:
        now = keeper.reached(run._budget_spent(), run._session_budget())
        return not now or stops(now)

    await workflow.wait_condition(changed)
    keeper.waiting = []
    scope, budget, by = keeper._raised or ("session", run._session_budget() or Budget(), None)
    keeper._raised = None
    raised = BudgetRaised(scope=scope, budget=budget.model_dump(exclude_none=True), by=by)
    await run._set_phase("turn", raised)


def _reached_event(item: Reached, text: str, *, stopped: bool) -> BudgetReached:
    return BudgetReached(
        scope=item.scope,
        limit=item.limit,
        allowed=item.allowed,
        spent=item.spent,
        stopped=stopped,
        message=text,
    )
