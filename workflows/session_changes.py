"""Changes to an idle session, serialized with its runs by the session's workflow id.

Clients send every session change (config setters, facade writes) with signal-with-start
on the session's workflow id: a running run takes it as a pending write; otherwise this
short workflow starts, applies it (and anything sent meanwhile) and ends. Either way no
change races a run for the session's leaf.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from duragent.domain.changes import SessionChange
    from duragent.domain.turns import ApplyChangesInput

from duragent.workflows import steps

FIRST_SIGNAL_WAIT = timedelta(seconds=30)


@workflow.defn(name="SessionChanges")
class SessionChanges:
    def __init__(self) -> None:
        self._changes: list[SessionChange] = []
        self._seen: set[str] = set()

    @workflow.signal
    def change(self, change: SessionChange) -> None:
        if change.id not in self._seen:
            self._seen.add(change.id)
            self._changes.append(change)

    @workflow.run
    async def run(self, session_id: str) -> int:
        applied = 0
        await workflow.wait_condition(lambda: bool(self._changes), timeout=FIRST_SIGNAL_WAIT)
        while self._changes:
            batch, self._changes = self._changes, []
            await steps.apply_changes(ApplyChangesInput(session_id=session_id, changes=batch))
            applied += len(batch)
        return applied
