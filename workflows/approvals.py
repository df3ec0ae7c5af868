"""The approval gate: tool calls the session's policy asks about wait here for a person.

A waiting call runs no activity and sets no timer (unless the policy has a timeout): it
is a `wait_condition` on the workflow's own state, so it survives worker and server
restarts and may wait for days. Decisions arrive as the `decide_approval` update; its
validator and handler run on the workflow's thread, and the handler marks the call
decided before it returns, so of two racing approvers exactly one wins and the other's
update is refused. "Always" adds an exact allow rule to the session's policy: at once for
the calls of this run, and as a policy entry through the run's pending writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from duragent.domain.approvals import (
        ApprovalAsk,
        ApprovalDecision,
        ApprovalOutcome,
        ApprovalPolicy,
        PendingApproval,
        already_decided_text,
        has_control_operator,
        refusal_by_person,
        timed_out_text,
    )
    from duragent.domain.changes import ConfigChange, SessionChange
    from duragent.domain.entries import ApprovalPolicyChangeEntry, SessionEntry
    from duragent.domain.events import ApprovalDecided, ApprovalRequested, RunEventPayload
    from duragent.domain.tools import ToolCallRef

"""Marks the histories of runs in which a call waited at the gate."""

Record = Callable[[bool, RunEventPayload], Awaitable[None]]
"""Records a run event; True: the phase is `awaiting_approval` with it, False: it is not
(any more)."""


class ApprovalRefused(ValueError):
    """A decision the gate cannot take: the update is rejected with this message."""


class ApprovalGate:
    def __init__(self) -> None:
        self.policy: ApprovalPolicy | None = None
        """The policy of the turn whose calls wait (what "always" adds a rule to)."""
        self._waiting: dict[str, tuple[PendingApproval, ApprovalAsk]] = {}
        self._decided: dict[str, ApprovalDecision] = {}
        """Every call decided in this execution, the decision taken."""
        self._always: set[tuple[str, str | None]] = set()
        """(tool, command) pairs approved for the rest of the run."""

    def pending(self) -> list[PendingApproval]:
        return [pending for pending, _ in self._waiting.values()]

    def check(self, decision: ApprovalDecision) -> None:
        """`ApprovalRefused` unless the decision can be taken now."""
        call_id = decision.call_id
        earlier = self._decided.get(call_id)
        if earlier is not None:
            raise ApprovalRefused(already_decided_text(call_id, earlier.decision, earlier.by))
        if call_id not in self._waiting:
            waiting = ", ".join(self._waiting) or "none"
            raise ApprovalRefused(
                f"no tool call {call_id!r} is waiting for approval in this run (waiting: {waiting})"
            )
        _, ask = self._waiting[call_id]
        if decision.decision == "always" and ask.command and has_control_operator(ask.command):
            raise ApprovalRefused(
                f"tool call {call_id!r} cannot be approved always: its command chains, pipes "
                "or redirects (; & | ` $( < > or a newline), which allow rules never match; "
                "approve it once instead"
            )

    def decide(
        self,
        decision: ApprovalDecision,
        pending_writes: list[SessionEntry],
        change_id: str,
        timestamp: int,
    ) -> tuple[ApprovalOutcome, SessionChange | None]:
        """Take a decision (checked again: a racing update may have taken one since its
        validator ran); for "always", the policy change to hold as a pending write."""
        try:
            self.check(decision)
        except ApprovalRefused as err:
            raise ApplicationError(str(err), type="ApprovalRefused", non_retryable=True) from err
        self._decided[decision.call_id] = decision
        if decision.decision != "always":
            return ApprovalOutcome(call_id=decision.call_id, decision=decision.decision), None
        pending, ask = self._waiting[decision.call_id]
        key = (pending.tool_name, ask.command)
        self._always.add(key)
        also = [
            other.call_id
            for other, other_ask in self._waiting.values()
            if other.call_id not in self._decided and (other.tool_name, other_ask.command) == key
        ]
        for call_id in also:
            self._decided[call_id] = decision.model_copy(update={"call_id": call_id})
        base = _latest_pending_policy(pending_writes) or self.policy or ApprovalPolicy()
        self.policy = base.with_allowed(pending.tool_name, ask.command)
        change = SessionChange(
            id=change_id, config=ConfigChange(approval_policy=self.policy), timestamp=timestamp
        )
        outcome = ApprovalOutcome(call_id=decision.call_id, decision="always", also_approved=also)
        return outcome, change

    async def wait(
        self, call: ToolCallRef, turn: int, assistant_id: str, now_ms: int, record: Record
    ) -> ToolCallRef:
        """The call as it may run once decided: as it is if approved, refused with the
        decision's reason if denied or timed out. Cancellation (abort, interrupting
        guidance) withdraws the request and propagates."""
        ask = call.approval
        assert ask is not None
        if (call.name, ask.command) in self._always:
            return call
        pending = PendingApproval(
            call_id=call.id,
            tool_name=call.name,
            args_preview=call.args_preview,
            turn=turn,
            assistant_entry_id=assistant_id,
            requested_at=now_ms,
            rule=ask.rule,
            timeout_s=ask.timeout_s,
        )
        self._waiting[call.id] = (pending, ask)
        await record(
            True,
            ApprovalRequested(
                call_id=call.id,
                tool_name=call.name,
                args_preview=call.args_preview,
                turn=pending.turn,
                assistant_entry_id=pending.assistant_entry_id,
                rule=ask.rule,
                timeout_s=ask.timeout_s,
            ),
        )
        timeout = timedelta(seconds=ask.timeout_s) if ask.timeout_s else None
        try:
            await workflow.wait_condition(lambda: call.id in self._decided, timeout=timeout)
        except TimeoutError:
            self._decided[call.id] = ApprovalDecision(
                call_id=call.id, decision="deny", reason=timed_out_text(ask.timeout_s or 0)
            )
            self._waiting.pop(call.id, None)
            text = timed_out_text(ask.timeout_s or 0)
            await record(bool(self._waiting), _decided(call.id, "timeout", text, None))
            return call.model_copy(update={"refused": text})
        except asyncio.CancelledError:
            self._waiting.pop(call.id, None)
            self._decided.setdefault(
                call.id, ApprovalDecision(call_id=call.id, decision="deny", reason="withdrawn")
            )
            await record(bool(self._waiting), _decided(call.id, "withdrawn", None, None))
            raise
        self._waiting.pop(call.id, None)
        decision = self._decided[call.id]
        await record(
            bool(self._waiting),
            _decided(call.id, decision.decision, decision.reason, decision.by),
        )
        if decision.decision == "deny":
            return call.model_copy(update={"refused": refusal_by_person(decision.reason)})
        return call


def _decided(call_id: str, decision: str, reason: str | None, by: str | None) -> ApprovalDecided:
    return ApprovalDecided(call_id=call_id, decision=decision, reason=reason, by=by)


def _latest_pending_policy(writes: list[SessionEntry]) -> ApprovalPolicy | None:
    """A policy set during this run and not saved yet: newer than the turn's."""
    for entry in reversed(writes):
        if isinstance(entry, ApprovalPolicyChangeEntry):
            return entry.policy
    return None
