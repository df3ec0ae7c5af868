"""Turn snapshots by id, so activity inputs carry a reference instead of the prompt."""

from __future__ import annotations

from sqlalchemy.orm import Session

from duragent.domain.config import TurnSnapshot
from duragent.store.clock import now_ms
from duragent.store.tables import TurnSnapshotRow, table_of
from duragent.store.upsert import insert_ignore


def put_snapshot(db: Session, snapshot: TurnSnapshot) -> str:
    insert_ignore(
        db,
        table_of(TurnSnapshotRow),
        [{"id": snapshot.id, "payload": snapshot.model_dump(), "created_at": now_ms()}],
        conflict=["id"],
    )
    return snapshot.id


def get_snapshot(db: Session, snapshot_id: str) -> TurnSnapshot:
    row = db.get(TurnSnapshotRow, snapshot_id)
    if row is None:
        raise LookupError(f"turn snapshot {snapshot_id!r} does not exist")
    return TurnSnapshot.model_validate(row.payload)
