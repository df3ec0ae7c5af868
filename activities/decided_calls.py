"""The end of a tool call the workflow carried out itself (an `ask_user` question, a
`delegate` call): its result staged and its end emitted, in one transaction.

No tool activity ran such a call, so nothing else stages its result. Idempotent: a
retry stages the same entry again and its events carry dedup keys.
"""

from __future__ import annotations

from typing import Protocol

from duragent.domain.events import tool_call_ended
from duragent.domain.tools import ToolResult
from duragent.domain.turns import ToolCallOutcome
from duragent.store import events, staging
from duragent.store.db import Database
from duragent.store.events import keyed


class DecidedCallInput(Protocol):
    """Where the result of a call the workflow carried out goes: the input of the step
    that ends it (`StageAnswerInput`, `FinishSubagentInput`)."""

    @property
    def session_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def result_entry_id(self) -> str: ...


def finish_decided_call(
    db: Database,
    data: DecidedCallInput,
    *,
    kind: str,
    call_id: str,
    tool_name: str,
    result: ToolResult,
    started_at_ms: int,
    ended_at_ms: int,
    interrupted: bool = False,
) -> ToolCallOutcome:
    """Stage `result` as the call's message at `data.result_entry_id` and emit the call's
    end (keyed `<run>/<kind>/<call>/end`); the outcome the workflow's batch collects."""
    session_id, run_id, entry_id = data.session_id, data.run_id, data.result_entry_id
    message = result.to_message(call_id, tool_name, ended_at_ms)
    duration_ms = max(0, ended_at_ms - started_at_ms)
    ended = tool_call_ended(entry_id, result, message, duration_ms)
    events_key = f"{run_id}/{kind}/{call_id}/end"  # a retry's events are dropped as dups
    with db.transaction() as session:
        staging.stage_message(
            session, entry_id=entry_id, session_id=session_id, run_id=run_id, message=message
        )
        events.append_events(session, session_id, run_id, keyed(events_key, ended))
    return ToolCallOutcome.of(result, message, duration_ms, interrupted=interrupted)
