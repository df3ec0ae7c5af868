"""Approval of tool calls: the session's policy, the calls that wait, the decisions.

A decision is the `decide_approval` update of the session's run: the caller learns at
once whether the run took it. An update needs a worker; when none answers for the run,
the decision is refused with `ApprovalNotRecorded` (nothing was sent, so nothing is
taken later by surprise), and the update's wait for a worker is bounded as well.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError

from duragent.client.bounds import bounded, one_line
from duragent.client.errors import ApprovalNotRecorded, ApprovalRefused, InvalidChange
from duragent.client.part import StoreBackedPart, SyncPart
from duragent.client.waits import ended_event, send_word, waiting
from duragent.domain.approvals import (
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalPolicy,
    DecisionKind,
    PendingApproval,
    already_decided_text,
)
from duragent.domain.entries import ApprovalPolicyChangeEntry
from duragent.domain.events import ApprovalDecided
from duragent.domain.messages import AssistantMessage
from duragent.store import staging
from duragent.workflows.session_run import SessionRun


class SyncApprovals(SyncPart):
    """What the store says of approvals (`client.sync.approvals`)."""

    def _decided(self, session_id: str, call_id: str) -> str | None:
        """Why a decision on tool call `call_id` comes too late, if the store shows it
        decided (by a person, a timeout, or withdrawn with its run)."""
        decided = ended_event(
            self._client, session_id, "approval_decided", call_id, ApprovalDecided
        )
        if decided is None:
            return None
        return already_decided_text(call_id, decided.decision, decided.by)

    def _with_arguments(self, pending: list[PendingApproval]) -> list[PendingApproval]:
        ids = sorted({p.assistant_entry_id for p in pending})
        with self._client.db.transaction() as db:
            messages = staging.staged_messages(db, ids)
        filled = []
        for item in pending:
            message = messages.get(item.assistant_entry_id)
            calls = message.tool_calls if isinstance(message, AssistantMessage) else []
            arguments = next((c.arguments for c in calls if c.id == item.call_id), None)
            filled.append(item.model_copy(update={"arguments": arguments}))
        return filled


class Approvals(StoreBackedPart[SyncApprovals]):
    """The approval policy of a session and decisions on its waiting tool calls."""

    async def set_policy(self, session_id: str, policy: ApprovalPolicy | dict[str, Any]) -> None:
        """Set the policy the next turns use (branch-scoped, like the model)."""
        try:
            checked = ApprovalPolicy.model_validate(policy)
        except ValidationError as err:
            raise InvalidChange(f"approval policy: {one_line(err)}") from err
        await self._client.config.update(session_id, approval_policy=checked)

    async def policy(self, session_id: str) -> ApprovalPolicy | None:
        """The policy the session's next turn uses: one set during the open run (still a
        pending write), else the one on the session's path (None: every call runs)."""
        status = await self._client.sessions.status(session_id)
        pending = status.run.pending_writes if status.run else []
        for entry in reversed(pending):
            if isinstance(entry, ApprovalPolicyChangeEntry):
                return entry.policy
        stored, _, _ = await self._client.sessions.stored_status(session_id)
        return stored.approval_policy

    async def pending(self, session_id: str) -> list[PendingApproval]:
        """The tool calls of the session's run that wait for a decision, with their full
        arguments (read from the staged assistant message); empty when none waits."""
        what = "its waiting tool calls"
        pending = await waiting(self._client, session_id, SessionRun.approvals, what)
        return await asyncio.to_thread(self._store._with_arguments, pending)

    async def approve(
        self, session_id: str, call_id: str, *, always: bool = False, by: str | None = None
    ) -> ApprovalOutcome:
        """Let a waiting call run; `always` also allows this tool (and this exact bash
        command) for the rest of the session's branch."""
        return await self._decide(session_id, call_id, "always" if always else "approve", None, by)

    async def deny(
        self, session_id: str, call_id: str, reason: str | None = None, *, by: str | None = None
    ) -> ApprovalOutcome:
        """Answer a waiting call with an error the model reads (with `reason`, if given)."""
        return await self._decide(session_id, call_id, "deny", reason, by)

    async def _decide(
        self,
        session_id: str,
        call_id: str,
        kind: DecisionKind,
        reason: str | None,
        by: str | None,
    ) -> ApprovalOutcome:
        if reason is not None:
            bounded("deny reason", reason)
        try:
            decision = ApprovalDecision(call_id=call_id, decision=kind, reason=reason, by=by)
        except ValidationError as err:
            raise ApprovalRefused(one_line(err)) from err
        return await send_word(
            self._client,
            session_id,
            SessionRun.decide_approval,
            decision,
            what=f"{kind} tool call {call_id!r}",
            refused=ApprovalRefused,
            not_recorded=ApprovalNotRecorded,
            too_late=lambda: self._store._decided(session_id, call_id),
        )
