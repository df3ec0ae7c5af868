"""Budgets over HTTP: a session's budget and spending, and raising a waiting run's.

A raise answers once the run took it (200), or says why not: it lowers a limit or leaves
one reached (422), no run is open (409), or no worker answers for the run (503: nothing
was recorded). Another user's session is not found (404), as everywhere.
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from duragent.api.ownership import owned_session
from duragent.client.api import DuragentClient
from duragent.domain.budgets import Budget, BudgetView, Scope


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionBudget(_Body):
    budget: Budget | None
    """None (or a budget without limits): no session budget."""


class Raise(_Body):
    budget: Budget
    """The scope's whole new budget: each limit at least as high as before."""
    scope: Scope | None = None
    """run or session; by default the budget the run waits on (else the run's)."""


def budget_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = APIRouter(prefix="/api")
    User = Annotated[str, Depends(current_user)]

    @router.get("/sessions/{session_id}/budget")
    async def get_budget(session_id: str, owner: User) -> BudgetView:
        await owned_session(client, session_id, owner)
        return await client.budgets.get(session_id)

    @router.put("/sessions/{session_id}/budget")
    async def set_budget(session_id: str, body: SessionBudget, owner: User) -> BudgetView:
        await owned_session(client, session_id, owner)
        await client.budgets.set(session_id, body.budget or Budget())
        return await client.budgets.get(session_id)

    @router.post("/sessions/{session_id}/budget/raise")
    async def raise_budget(session_id: str, body: Raise, owner: User) -> BudgetView:
        await owned_session(client, session_id, owner)
        return await client.budgets.raise_limits(
            session_id, body.budget, scope=body.scope, by=owner
        )

    return router
