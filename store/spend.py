"""What a session's runs have spent, in the units budgets limit (domain.budgets).

Turns, tokens and wall time come from the run states (a run's stored usage includes its
sub-agents' and its compactions'); cost from the model calls' messages of the session and
of its sub-agents' sessions, each priced by the model that wrote it (`domain.cost`). A
compaction or branch summary made outside any run (on an idle session) adds its tokens
from its message, having no run state.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from duragent.domain.budgets import Spent
from duragent.domain.cost import ModelUsage, cost_of
from duragent.domain.messages import Usage
from duragent.domain.prices import PriceTable
from duragent.store import sessions
from duragent.store.tables import RunStateRow
from duragent.store.usage import model_usage, usage_after

MAX_SESSIONS = 1000
"""Sub-agent sessions priced at most (a bound, not a limit anyone meets)."""


def session_spend(
    db: Session, session_id: str, prices: PriceTable, *, except_run: str | None = None
) -> Spent:
    """What the session's runs (all but `except_run`, which counts its own) have spent."""
    rows = db.execute(
        select(
            RunStateRow.run_id,
            RunStateRow.turns,
            RunStateRow.usage,
            RunStateRow.started_at,
            RunStateRow.updated_at,
            RunStateRow.ended_at,
        ).where(RunStateRow.session_id == session_id)
    )
    turns, tokens, wall_ms = 0, 0, 0
    runs = set()
    for run_id, run_turns, usage, started, updated, ended in rows:
        runs.add(run_id)
        if run_id == except_run:
            continue
        turns += run_turns
        tokens += Usage.model_validate(usage or {}).total_tokens
        wall_ms += max(0, (ended or updated) - started)
    parts, outside_runs = _priced_parts(db, session_id, except_run, runs)
    tokens += sum(part.usage.total_tokens for part in outside_runs)
    cost = cost_of(parts, prices)
    known = sum(p.cost_usd for p in cost.by_model if p.cost_usd is not None)
    return Spent(
        turns=turns,
        tokens=tokens,
        cost_usd=known,
        wall_s=wall_ms / 1000,
        unpriced_models=cost.unpriced_models,
    )


def _priced_parts(
    db: Session, session_id: str, except_run: str | None, runs: set[str]
) -> tuple[list[ModelUsage], list[ModelUsage]]:
    """The model calls of the session's runs and of its sub-agents' sessions (those the
    excepted run started are its own spend), grouped by model; and those of the session's
    own that no run made (`runs` are its runs), whose tokens no run state holds."""
    parts: list[ModelUsage] = []
    outside_runs: list[ModelUsage] = []
    todo, seen = [session_id], {session_id}
    while todo and len(seen) <= MAX_SESSIONS:
        current = todo.pop()
        sums: dict[str, dict[str | None, list[int]]] = {}
        usage_after(db, current, 0, sums)
        for run_id, run_parts in model_usage(sums).items():
            if run_id != except_run:
                parts += run_parts
            if current == session_id and run_id not in runs:
                outside_runs += run_parts
        for child in sessions.children(db, current):
            if child.id not in seen and child.parent_run_id != except_run:
                seen.add(child.id)
                todo.append(child.id)
    return parts, outside_runs
