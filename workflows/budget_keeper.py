"""What a run keeps of its budget (domain.budgets): the budget, what it spent beyond turns
and usage (which the run's state keeps), the limits it waits on, and the raises it takes.
Plain state for the workflow: `workflows.budgets` is the check in the loop."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.budgets import (
        Budget,
        BudgetCarried,
        BudgetRaise,
        BudgetView,
        Reached,
        Scope,
        Spent,
        raise_refusal,
        reached,
        remaining,
        tighter,
    )
    from duragent.domain.changes import ConfigChange, SessionChange
    from duragent.domain.cost import TurnCost
    from duragent.domain.messages import Usage
    from duragent.domain.runs import RunInput, RunResult


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
        self.raised: tuple[Scope, Budget, str | None] | None = None
        """The last raise taken, for the event the waiting run emits as it goes on."""

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
        self.raised = (scope, change.budget, change.by)
        if scope == "run":
            self.run_budget = change.budget
            return None
        config = ConfigChange(budget=change.budget)
        return SessionChange(id=change_id, config=config, timestamp=timestamp)
