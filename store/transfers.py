"""Workspaces on their way between hosts, in pieces (`WorkspaceChunkRow`)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from duragent.store.clock import now_ms
from duragent.store.tables import WorkspaceChunkRow


def put_chunk(db: Session, transfer_id: str, seq: int, data: bytes) -> None:
    db.add(WorkspaceChunkRow(transfer_id=transfer_id, seq=seq, data=data, created_at=now_ms()))
    db.flush()


def chunk_count(db: Session, transfer_id: str) -> int:
    query = select(func.count()).where(WorkspaceChunkRow.transfer_id == transfer_id)
    return int(db.scalar(query) or 0)


def read_chunks(db: Session, transfer_id: str) -> Iterator[bytes]:
    """The pieces in order, one row in memory at a time."""
    count = chunk_count(db, transfer_id)
    for seq in range(count):
        row = db.get(WorkspaceChunkRow, (transfer_id, seq))
        if row is not None:
            yield row.data
            db.expunge(row)


def drop_transfer(db: Session, transfer_id: str) -> None:
    db.execute(delete(WorkspaceChunkRow).where(WorkspaceChunkRow.transfer_id == transfer_id))
