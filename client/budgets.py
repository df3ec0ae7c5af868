"""Budgets (docs/SPEC.md, budgets): a session's budget, what its runs spent, and raising
the budget a run waits on.

The session's budget is session-wide config (a setter like the others: a running run
uses it from its next save point). A run's own budget is given when it starts
(`prompt(..., budget=...)`). A raise is the `raise_budget` update of the session's run,
as a tool-call decision is: the caller learns at once whether the run took it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import ValidationError

from duragent.client.bounds import one_line
from duragent.client.errors import InvalidChange, WorkerNotAnswering
from duragent.client.part import StoreBackedPart, SyncPart
from duragent.domain.budgets import Budget, BudgetRaise, BudgetView, Scope, Spent
from duragent.domain.prices import PriceTable
from duragent.store.spend import session_spend
from duragent.workflows.session_run import SessionRun

RAISE_TIMEOUT = timedelta(seconds=10)
"""How long a raise waits for the run's worker to take it."""


class BudgetRefused(InvalidChange):
    """A budget the run did not take: a raise that lowers a limit or leaves one reached,
    or a cost limit for a model without a price."""


class BudgetNotRaised(WorkerNotAnswering):
    """No worker took a raise: nothing was recorded."""


def checked_budget(budget: Budget | dict[str, Any]) -> Budget:
    try:
        return Budget.model_validate(budget)
    except ValidationError as err:
        raise BudgetRefused(f"budget: {one_line(err)}") from err


def check_priced(budget: Budget | None, model: str, prices: PriceTable) -> None:
    """A cost limit needs a price for the session's model: refused (`BudgetRefused`)
    when the price table has none, rather than a limit that would count nothing. (A model
    switched to later without a price counts nothing toward cost; the budget's view names
    it.)"""
    if budget is None or budget.max_cost_usd is None or prices.price_of(model) is not None:
        return
    raise BudgetRefused(
        f"a cost limit needs a price for model {model!r}, and the price table "
        f"(as of {prices.as_of}) has none; add it with DURAGENT_PRICES_FILE "
        "or limit tokens instead"
    )


def in_force(budget: Budget | None) -> Budget | None:
    """None for a budget without limits: a removed session budget is kept as one (a
    setting is never unset), and reads as none."""
    return budget if budget is not None and budget.limited else None


class SyncBudgets(SyncPart):
    """What the store says of budgets (`client.sync.budgets`)."""

    def _session_spent(self, session_id: str) -> Spent:
        with self._client.db.transaction() as db:
            return session_spend(db, session_id, self._client.prices)


class Budgets(StoreBackedPart[SyncBudgets]):
    """A session's budget and its runs' spending."""

    async def set(self, session_id: str, budget: Budget | dict[str, Any]) -> None:
        """Set what all the session's runs together may spend (a budget without limits
        removes it). A running run checks it from its next save point."""
        checked = checked_budget(budget)
        status = await self._client.sessions.status(session_id)
        check_priced(checked, status.config.model, self._client.prices)
        await self._client.config.update(session_id, budget=checked)

    async def get(self, session_id: str) -> BudgetView:
        """The session's budget (None: none, or removed) and spending; with the open run's
        budget and spending (and the limits it waits on) while one runs with a budget."""
        status = await self._client.sessions.status(session_id)
        if status.run is not None and status.run.budget is not None:
            view = status.run.budget
            if view.session_spent is None:  # the run has not read it (no session budget)
                spent = await asyncio.to_thread(self._store._session_spent, session_id)
                view = view.model_copy(update={"session_spent": spent})
            return view.model_copy(update={"session_budget": in_force(view.session_budget)})
        spent = await asyncio.to_thread(self._store._session_spent, session_id)
        return BudgetView(session_budget=in_force(status.config.budget), session_spent=spent)

    async def raise_limits(
        self,
        session_id: str,
        budget: Budget | dict[str, Any],
        *,
        scope: Scope | None = None,
        by: str | None = None,
    ) -> BudgetView:
        """Raise the open run's budget (`scope="run"`) or its session's; by default the
        one the run waits on. A raise lowers no limit and leaves none reached; a run that
        waited on the budget goes on."""
        try:
            change = BudgetRaise(budget=checked_budget(budget), scope=scope, by=by)
        except ValidationError as err:
            raise BudgetRefused(one_line(err)) from err
        return await self._client.workflows.update_open_run(
            session_id,
            SessionRun.raise_budget,
            change,
            what="raise a run's budget",
            timeout=RAISE_TIMEOUT,
            refused=BudgetRefused,
            not_taken=lambda _: BudgetNotRaised(session_id, "the budget was not raised"),
        )
