"""The persisted input queue: items wait here until a run takes them.

Taking an item is a compare-and-set on its status, so an item is consumed at most once
even when two runs (or a retried step) race for it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal, cast, get_args

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from duragent.domain.guidance import GuidanceIntent, GuidanceItem, classify
from duragent.domain.messages import AgentMessage, text_of
from duragent.domain.queues import QueuedMessage
from duragent.store.clock import now_ms
from duragent.store.records import QueueItem
from duragent.store.statements import Tx, execute
from duragent.store.tables import EntryRow, InputQueueRow, RunStateRow

QueueKind = Literal["next_turn", "guidance"]
_INTENTS = get_args(GuidanceIntent)


def add_item(
    db: Session,
    *,
    item_id: str,
    session_id: str,
    kind: QueueKind,
    message: AgentMessage,
    run_id: str | None = None,
    starts_run: bool = False,
) -> QueueItem:
    """Queue a message; adding an id that is already queued returns the stored item.
    `starts_run`: it starts the next run when the open one ends (`queue_while_running`)."""
    existing = db.get(InputQueueRow, item_id)
    if existing is not None:
        return QueueItem.model_validate(existing)
    position = db.scalar(
        select(func.coalesce(func.max(InputQueueRow.position), 0)).where(
            InputQueueRow.session_id == session_id
        )
    )
    now = now_ms()
    row = InputQueueRow(
        id=item_id,
        session_id=session_id,
        kind=kind,
        status="pending",
        run_id=run_id,
        text=text_of(message.content),
        message=message.model_dump(mode="json"),
        position=(position or 0) + 1,
        created_at=now,
        updated_at=now,
        consumed_at=None,
        starts_run=starts_run,
    )
    db.add(row)
    db.flush()
    return QueueItem.model_validate(row)


def queue_for_next_run(db: Session, session_id: str, items: Sequence[QueuedMessage]) -> None:
    """Steering and follow-ups a run was sent and never reached: kept, in order, to start
    the next run (each once: its id is the message's)."""
    for item in items:
        add_item(
            db,
            item_id=item.id,
            session_id=session_id,
            kind="next_turn",
            message=item.message,
            starts_run=True,
        )


class RunClosing(Exception):
    """The open run's end is stored already: it takes no more input (`queue_while_running`)."""


def queue_while_running(
    db: Session, *, item_id: str, session_id: str, run_id: str, message: AgentMessage
) -> QueueItem:
    """Queue input sent while the session's run `run_id` is open: it starts the next run
    when that one ends (`finish_run` chains it), unless a run takes it first.
    `RunClosing` (roll the transaction back) when that run's end is stored already.

    The item is written first, then the run's row read under a row lock: the run's end
    updates that row first, then reads the queue (`has_run_starting_input`). So the two
    come one after the other, on SQLite (one writer) and PostgreSQL alike: either the
    end sees this item, or this sees the end. A run not recorded yet (its start is on its
    way) takes pending input when it starts."""
    item = add_item(
        db,
        item_id=item_id,
        session_id=session_id,
        kind="next_turn",
        message=message,
        starts_run=True,
    )
    ended = db.execute(
        select(RunStateRow.ended_at).where(RunStateRow.run_id == run_id).with_for_update()
    ).first()
    if ended is not None and ended.ended_at is not None:
        raise RunClosing(run_id)
    return item


def has_run_starting_input(db: Session, session_id: str) -> bool:
    """Whether input that starts a run when the open one ends waits (see `queue_while_running`)."""
    found = db.scalar(
        select(InputQueueRow.id)
        .where(
            InputQueueRow.session_id == session_id,
            InputQueueRow.status == "pending",
            InputQueueRow.kind == "next_turn",
            InputQueueRow.starts_run.is_(True),
        )
        .limit(1)
    )
    return found is not None


def count_pending(db: Session, session_id: str) -> int:
    """How many of the session's items are pending."""
    counted = db.scalar(
        select(func.count())
        .select_from(InputQueueRow)
        .where(InputQueueRow.session_id == session_id, InputQueueRow.status == "pending")
    )
    return int(counted or 0)


def list_items(
    db: Session, session_id: str, *, status: str | None = "pending", kind: QueueKind | None = None
) -> list[QueueItem]:
    query = select(InputQueueRow).where(InputQueueRow.session_id == session_id)
    if status is not None:
        query = query.where(InputQueueRow.status == status)
    if kind is not None:
        query = query.where(InputQueueRow.kind == kind)
    return [
        QueueItem.model_validate(row) for row in db.scalars(query.order_by(InputQueueRow.position))
    ]


def consume(db: Session, item_id: str, run_id: str) -> bool:
    """pending -> consumed, bound to `run_id`; False if the item is no longer pending."""
    now = now_ms()
    result = db.execute(
        update(InputQueueRow)
        .where(InputQueueRow.id == item_id, InputQueueRow.status == "pending")
        .values(status="consumed", run_id=run_id, consumed_at=now, updated_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def consumed_by(db: Session, run_id: str, kind: QueueKind) -> list[QueueItem]:
    rows = db.scalars(
        select(InputQueueRow)
        .where(
            InputQueueRow.run_id == run_id,
            InputQueueRow.kind == kind,
            InputQueueRow.status == "consumed",
        )
        .order_by(InputQueueRow.position)
    )
    return [QueueItem.model_validate(row) for row in rows]


def get_item(db: Session, item_id: str) -> QueueItem | None:
    row = db.get(InputQueueRow, item_id)
    return QueueItem.model_validate(row) if row else None


def guide(db: Session, item_id: str, run_id: str, intent: GuidanceIntent) -> bool:
    """A pending item becomes guidance bound to `run_id`; False if it is not pending."""
    result = db.execute(
        update(InputQueueRow)
        .where(InputQueueRow.id == item_id, InputQueueRow.status == "pending")
        .values(kind="guidance", run_id=run_id, intent=intent, updated_at=now_ms())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


# Built once: a turn reads it before its calls start, and the guidance watch every tick.
_PENDING_GUIDANCE = (
    select(InputQueueRow.id, InputQueueRow.run_id, InputQueueRow.text, InputQueueRow.intent)
    .where(
        InputQueueRow.session_id.in_(bindparam("sessions", expanding=True)),
        InputQueueRow.status == "pending",
        InputQueueRow.kind == "guidance",
    )
    .order_by(InputQueueRow.position)
)


def pending_guidance(db: Tx, session_ids: Collection[str]) -> list[tuple[str | None, GuidanceItem]]:
    """The guidance pending for the runs of these sessions, each item with the id of the
    run it is bound to, in the order it was sent."""
    rows = execute(db, _PENDING_GUIDANCE, {"sessions": list(session_ids)})
    return [
        (
            row.run_id,
            GuidanceItem(
                id=row.id,
                text=row.text,
                # Items guided before intents were kept: decided as the client would have.
                intent=cast(GuidanceIntent, row.intent)
                if row.intent in _INTENTS
                else classify(row.text),
            ),
        )
        for row in rows
    ]


def cancel(db: Session, item_id: str) -> bool:
    """pending -> cancelled (edit and delete); False if it is no longer pending."""
    result = db.execute(
        update(InputQueueRow)
        .where(InputQueueRow.id == item_id, InputQueueRow.status == "pending")
        .values(status="cancelled", updated_at=now_ms())
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def take_guidance(db: Session, run_id: str, item_ids: list[str]) -> list[str]:
    """Consume the given guidance items for `run_id`: each only if still pending guidance
    bound to this run. Items this run took before count as taken (a retried step)."""
    now = now_ms()
    taken = []
    for item_id in item_ids:
        db.execute(
            update(InputQueueRow)
            .where(
                InputQueueRow.id == item_id,
                InputQueueRow.status == "pending",
                InputQueueRow.kind == "guidance",
                InputQueueRow.run_id == run_id,
            )
            .values(status="consumed", consumed_at=now, updated_at=now)
        )
        row = db.get(InputQueueRow, item_id)
        if row is not None and row.status == "consumed" and row.run_id == run_id:
            taken.append(item_id)
    return taken


def release_guidance(db: Session, run_id: str) -> None:
    """Guidance the run ended without taking goes back to the queue as next_turn input,
    which starts the next run (it was sent while this one was open)."""
    db.execute(
        update(InputQueueRow)
        .where(
            InputQueueRow.run_id == run_id,
            InputQueueRow.kind == "guidance",
            InputQueueRow.status == "pending",
        )
        .values(kind="next_turn", run_id=None, starts_run=True, updated_at=now_ms())
    )


def settle_taken_guidance(
    db: Session, session_id: str, run_id: str, *, stopped: bool
) -> list[QueueItem]:
    """Guidance the run took from the queue that never reached the session (a turn's
    activity took it, then the run ended before injecting it): cancelled when the run
    was stopped, as the rest of its input is; else back in the queue, to start the next
    run. Returns the items settled so."""
    injected = select(EntryRow.id).where(EntryRow.session_id == session_id)
    taken = (
        select(InputQueueRow)
        .where(
            InputQueueRow.session_id == session_id,  # the (session, status) index
            InputQueueRow.status == "consumed",
            InputQueueRow.run_id == run_id,
            InputQueueRow.kind == "guidance",
            InputQueueRow.id.not_in(injected),
        )
        .order_by(InputQueueRow.position)
    )
    rows = list(db.scalars(taken))
    now = now_ms()
    for row in rows:
        if stopped:
            row.status = "cancelled"
        else:
            row.kind, row.status, row.run_id, row.starts_run = "next_turn", "pending", None, True
        row.consumed_at, row.updated_at = None, now
    db.flush()
    return [QueueItem.model_validate(row) for row in rows]


def cancel_pending(db: Session, session_id: str) -> list[QueueItem]:
    """Stopping a run cancels the session's pending input (docs/SPEC.md); returns it."""
    items = list_items(db, session_id)
    now = now_ms()
    db.execute(
        update(InputQueueRow)
        .where(InputQueueRow.session_id == session_id, InputQueueRow.status == "pending")
        .values(status="cancelled", updated_at=now)
    )
    return items
