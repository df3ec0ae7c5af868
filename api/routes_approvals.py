"""Approval of tool calls over HTTP: the session's policy, the calls that wait, decisions.

A decision answers once the run took it (200), or says why not: no such call waits or it
was decided already (409), or no worker answers for the run (503: nothing was recorded).
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from duragent.api.ownership import owned_session
from duragent.api.routes_waits import waiting_router
from duragent.client.api import DuragentClient
from duragent.domain.approvals import (
    MAX_REASON_CHARS,
    ApprovalOutcome,
    ApprovalPolicy,
    PendingApproval,
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Approve(_Body):
    always: bool = False
    """Also allow this tool (bash: this exact command) for the rest of the session."""


class Deny(_Body):
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    """What the model reads as the call's error result."""


class PolicyView(_Body):
    policy: ApprovalPolicy | None
    """None: no policy, every call runs."""


def approval_routes(client: DuragentClient, current_user: Callable[..., str]) -> APIRouter:
    router = waiting_router(
        client, current_user, "approvals", client.approvals.pending, PendingApproval
    )
    User = Annotated[str, Depends(current_user)]

    @router.post("/sessions/{session_id}/approvals/{call_id}/approve")
    async def approve(
        session_id: str, call_id: str, owner: User, body: Approve | None = None
    ) -> ApprovalOutcome:
        await owned_session(client, session_id, owner)
        always = body.always if body else False
        return await client.approvals.approve(session_id, call_id, always=always, by=owner)

    @router.post("/sessions/{session_id}/approvals/{call_id}/deny")
    async def deny(
        session_id: str, call_id: str, owner: User, body: Deny | None = None
    ) -> ApprovalOutcome:
        await owned_session(client, session_id, owner)
        return await client.approvals.deny(
            session_id, call_id, body.reason if body else None, by=owner
        )

    @router.get("/sessions/{session_id}/approval-policy")
    async def get_policy(session_id: str, owner: User) -> PolicyView:
        await owned_session(client, session_id, owner)
        return PolicyView(policy=await client.approvals.policy(session_id))

    @router.put("/sessions/{session_id}/approval-policy")
    async def set_policy(session_id: str, body: PolicyView, owner: User) -> PolicyView:
        await owned_session(client, session_id, owner)
        await client.approvals.set_policy(session_id, body.policy or ApprovalPolicy())
        return PolicyView(policy=await client.approvals.policy(session_id))

    return router
