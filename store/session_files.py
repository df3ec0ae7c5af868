"""Portable sessions in the store: a session's tree read for export, and an imported one
written in one transaction (the format is `domain.session_file`)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from sqlalchemy import and_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from duragent.domain.config import SessionConfig
from duragent.domain.session_file import StoredEntry
from duragent.store import display, entries, sessions
from duragent.store.append import displayed
from duragent.store.entries import entry_of_row
from duragent.store.records import SessionRecord
from duragent.store.tables import DisplayMessageRow, EntryRow


class IdsTaken(LookupError):
    """Ids an import would keep that this store already has (none named: some were
    stored by another transaction while this one wrote)."""

    def __init__(self, taken: Sequence[str]) -> None:
        super().__init__(f"{len(taken)} taken" + (f", the first {taken[0]!r}" if taken else ""))
        self.taken = list(taken)


def exported_entries(db: Session, session_id: str) -> list[StoredEntry]:
    """Every entry of the session in stored order, each with the run that wrote it: the
    run its display message counts under when it has one (a branch summary's entry has
    no run, its message the navigation's id), else the entry's."""
    shown = DisplayMessageRow
    rows = db.execute(
        select(EntryRow, shown.run_id)
        .outerjoin(shown, and_(shown.id == EntryRow.id, shown.session_id == EntryRow.session_id))
        .where(EntryRow.session_id == session_id)
        .order_by(EntryRow.seq)
    )
    return [
        StoredEntry(entry=entry_of_row(row), run_id=shown_run or row.run_id)
        for row, shown_run in rows
    ]


def taken_ids(db: Session, session_id: str, entry_ids: Sequence[str]) -> list[str]:
    """Of a session id and entry ids, those the store has (as sessions, entries or the
    display messages that carry entry ids)."""
    taken = [session_id] if sessions.get_session(db, session_id) is not None else []
    found: set[str] = set()
    for start in range(0, len(entry_ids), _BATCH):
        batch = list(entry_ids[start : start + _BATCH])
        found |= entries.existing_ids(db, batch)
        found |= set(
            db.scalars(select(DisplayMessageRow.id).where(DisplayMessageRow.id.in_(batch)))
        )
    return taken + [i for i in entry_ids if i in found]


_BATCH = 500


def store_imported(
    db: Session,
    *,
    session_id: str,
    workspace: str,
    config: SessionConfig,
    name: str | None,
    owner: str | None,
    host: str | None,
    leaf_id: str | None,
    stored: Sequence[StoredEntry],
    check_ids: bool,
    created_at: int | None = None,
) -> SessionRecord:
    """A new session holding `stored` as they are (ids and links chosen by the caller),
    its display history rebuilt from them in order (each message under the run that
    wrote it, so its usage counts as it did), its leaf at `leaf_id`. All in the caller's
    transaction: a failure leaves nothing. With `check_ids`, `IdsTaken` when the store
    has any of the ids already. The session was created at `created_at` (default: now);
    each display message at its entry's time, as the file has it."""
    if check_ids:
        taken = taken_ids(db, session_id, [s.entry.id for s in stored])
        if taken:
            raise IdsTaken(taken)
    try:
        sessions.create_session(
            db,
            session_id=session_id,
            workspace=workspace,
            config=config,
            name=name,
            owner=owner,
            host=host,
            created_at=created_at,
        )
        for run_id, group in groupby(stored, key=lambda s: s.run_id):
            chunk = [s.entry for s in group]
            # Never skipped when stored (as a run's retried step would): an id taken
            # meanwhile fails the whole import rather than leaving a hole in it.
            entries.insert_new_entries(db, session_id, chunk, run_id=run_id)
            times = {entry.id: entry.timestamp for entry in chunk}
            display.append_display(db, session_id, run_id, displayed(chunk), times=times)
    except IntegrityError as err:
        raise IdsTaken([]) from err
    sessions.set_leaf(db, session_id, leaf_id)
    return sessions.require_session(db, session_id)
