"""What the store says right now, for the API's metrics: counted at each scrape.

A few grouped counts in one read transaction; nothing here is kept between scrapes, so
the figures are as true as the store is, whichever workers and API processes wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from sqlalchemy import and_, func, select
from sqlalchemy.orm import Session

from duragent.store.input_queue import QueueKind
from duragent.store.tables import InputQueueRow, RunEventRow, RunStateRow, SessionRow

APPROVAL_REQUESTED = "approval_requested"
APPROVAL_DECIDED = "approval_decided"


@dataclass
class StoreFigures:
    sessions: int = 0
    runs_in_progress: dict[str, int] = field(default_factory=dict)
    """Runs whose status is `running`, by phase (turn, awaiting_approval, ...)."""
    input_waiting: dict[str, int] = field(default_factory=dict)
    """Pending input-queue items, by kind (next_turn, guidance)."""
    approvals_waiting: int = 0
    """Tool calls of running runs asked about and not decided yet."""
    input_kinds: tuple[str, ...] = get_args(QueueKind)
    """Every kind of input-queue item, waiting or not."""


def store_figures(db: Session) -> StoreFigures:
    running = RunStateRow.status == "running"
    phases = db.execute(
        select(RunStateRow.phase, func.count()).where(running).group_by(RunStateRow.phase)
    )
    waiting = db.execute(
        select(InputQueueRow.kind, func.count())
        .where(InputQueueRow.status == "pending")
        .group_by(InputQueueRow.kind)
    )
    # Every request is answered by exactly one decision event (approve, deny, timeout,
    # withdrawn), so requests less decisions is what waits. Only runs in the phase can
    # have any: the join reads their sessions' events alone (by the events' key).
    approvals = db.execute(
        select(RunEventRow.type, func.count())
        .join(
            RunStateRow,
            and_(
                RunEventRow.session_id == RunStateRow.session_id,
                RunEventRow.run_id == RunStateRow.run_id,
            ),
        )
        .where(
            running,
            RunStateRow.phase == "awaiting_approval",
            RunEventRow.type.in_([APPROVAL_REQUESTED, APPROVAL_DECIDED]),
        )
        .group_by(RunEventRow.type)
    )
    by_type: dict[str, int] = {kind: count for kind, count in approvals}
    return StoreFigures(
        sessions=db.scalar(select(func.count()).select_from(SessionRow)) or 0,
        runs_in_progress={phase: count for phase, count in phases},
        input_waiting={kind: count for kind, count in waiting},
        approvals_waiting=max(
            0, by_type.get(APPROVAL_REQUESTED, 0) - by_type.get(APPROVAL_DECIDED, 0)
        ),
    )
