"""Triggers and the deliveries they remember (`client.triggers` uses them).

A trigger's record never carries its secret: only `secret_of` reads it, for checking a
signature, so a list or an answer made from records cannot show it.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from duragent.store.records import TriggerRecord
from duragent.store.statements import execute
from duragent.store.tables import TriggerDeliveryRow, TriggerRow, table_of
from duragent.store.upsert import INSERTS

_DELIVERIES = table_of(TriggerDeliveryRow)
_RECORD_COLUMNS = [
    TriggerRow.id,
    TriggerRow.owner,
    TriggerRow.name,
    TriggerRow.session_id,
    TriggerRow.template,
    TriggerRow.created_at,
    TriggerRow.secret_set_at,
]


def add_trigger(
    db: Session,
    *,
    trigger_id: str,
    owner: str | None,
    name: str,
    secret: str,
    session_id: str | None,
    template: str,
    at_ms: int,
) -> TriggerRecord:
    db.add(
        TriggerRow(
            id=trigger_id,
            owner=owner,
            name=name,
            secret=secret,
            session_id=session_id,
            template=template,
            created_at=at_ms,
            secret_set_at=at_ms,
        )
    )
    db.flush()
    found = get_trigger(db, trigger_id)
    assert found is not None
    return found


def get_trigger(db: Session, trigger_id: str) -> TriggerRecord | None:
    row = db.execute(select(*_RECORD_COLUMNS).where(TriggerRow.id == trigger_id)).first()
    return None if row is None else TriggerRecord.model_validate(row)


def list_triggers(
    db: Session, *, owner: str | None = None, unowned: bool = False, every: bool = False
) -> list[TriggerRecord]:
    """The triggers of `owner` (and with `unowned` those of no owner; `every`: all),
    oldest first."""
    query = select(*_RECORD_COLUMNS).order_by(TriggerRow.created_at, TriggerRow.id)
    if not every:
        mine = TriggerRow.owner == owner
        query = query.where(or_(mine, TriggerRow.owner.is_(None)) if unowned else mine)
    return [TriggerRecord.model_validate(row) for row in db.execute(query)]


def secret_of(db: Session, trigger_id: str) -> str | None:
    return db.scalar(select(TriggerRow.secret).where(TriggerRow.id == trigger_id))


def set_secret(db: Session, trigger_id: str, secret: str, at_ms: int) -> bool:
    """Replace the trigger's secret (the old one stops working at once)."""
    result = execute(
        db,
        update(TriggerRow)
        .where(TriggerRow.id == trigger_id)
        .values(secret=secret, secret_set_at=at_ms),
    )
    return bool(result.rowcount)


def delete_trigger(db: Session, trigger_id: str) -> bool:
    """Delete the trigger and the deliveries it remembers."""
    execute(db, delete(_DELIVERIES).where(_DELIVERIES.c.trigger_id == trigger_id))
    return bool(execute(db, delete(TriggerRow).where(TriggerRow.id == trigger_id)).rowcount)


def seen_delivery(
    db: Session, trigger_id: str, delivery_id: str, signature: str
) -> Literal["delivered", "undelivered", "other", "signature"] | None:
    """Which remembered delivery this one repeats: itself, "delivered" or not yet
    ("undelivered": an attempt failed or is under way), its id with another body
    ("other"), or its signed content under another id ("signature"); None if none."""
    rows = db.execute(
        select(_DELIVERIES.c.delivery_id, _DELIVERIES.c.signature, _DELIVERIES.c.delivered).where(
            _DELIVERIES.c.trigger_id == trigger_id,
            or_(_DELIVERIES.c.delivery_id == delivery_id, _DELIVERIES.c.signature == signature),
        )
    ).all()
    same = [row for row in rows if row.delivery_id == delivery_id]
    if same:
        if same[0].signature != signature:
            return "other"
        return "delivered" if same[0].delivered else "undelivered"
    return "signature" if rows else None


def remember_delivery(
    db: Session, trigger_id: str, delivery_id: str, signature: str, at_ms: int
) -> bool:
    """Remember a delivery, not delivered yet; False if its id or signature is remembered
    already (another request with it won the race)."""
    statement = INSERTS[db.get_bind().dialect.name](_DELIVERIES).on_conflict_do_nothing()
    row = {
        "trigger_id": trigger_id,
        "delivery_id": delivery_id,
        "signature": signature,
        "received_at": at_ms,
        "delivered": False,
    }
    return bool(execute(db, statement, row).rowcount)


def mark_delivered(db: Session, trigger_id: str, delivery_id: str) -> None:
    """The delivery's prompt reached its session: a resend of it is a replay from now on."""
    execute(
        db,
        update(_DELIVERIES)
        .where(_DELIVERIES.c.trigger_id == trigger_id, _DELIVERIES.c.delivery_id == delivery_id)
        .values(delivered=True),
    )


def prune_deliveries(db: Session, before_ms: int) -> int:
    """Forget the deliveries received before `before_ms` (an indexed range delete)."""
    return int(
        execute(db, delete(_DELIVERIES).where(_DELIVERIES.c.received_at < before_ms)).rowcount
    )
