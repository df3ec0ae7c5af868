"""The store read behind a session's budget: what the session's other runs have spent
(a local activity, once per run with a session budget; `store.spend`)."""

from __future__ import annotations

from temporalio import activity

from duragent.domain.budgets import SESSION_SPEND, SessionSpendInput, Spent
from duragent.domain.prices import PriceTable
from duragent.store.db import Database
from duragent.store.spend import session_spend


class BudgetReads:
    def __init__(self, db: Database, prices: PriceTable) -> None:
        self._db = db
        self._prices = prices

    @activity.defn(name=SESSION_SPEND)
    def session_spend(self, data: SessionSpendInput) -> Spent:
        with self._db.transaction() as db:
            return session_spend(db, data.session_id, self._prices, except_run=data.run_id)
