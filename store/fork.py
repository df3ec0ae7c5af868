"""Fork: a new session whose history is a copy of another's path up to an entry."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from duragent.domain.entries import MessageEntry, SessionEntry
from duragent.store import display, entries, sessions
from duragent.store.errors import EntryNotFound
from duragent.store.records import SessionRecord


def fork_session(
    db: Session, source_id: str, entry_id: str, *, name: str | None = None
) -> SessionRecord:
    """Copy the path root..`entry_id` of `source_id` into a new session (new entry ids,
    same shape), linking it to its parent session. The workspace is shared: files are
    not branched, only the conversation."""
    source = sessions.require_session(db, source_id)
    if not entries.belongs_to(db, entry_id, source_id):
        raise EntryNotFound(entry_id)
    path = entries.load_path(db, entry_id)
    new_ids = {e.id: uuid.uuid4().hex for e in path}
    copied: list[SessionEntry] = [
        e.model_copy(update={"id": new_ids[e.id], "parent_id": new_ids.get(e.parent_id or "")})
        for e in path
    ]
    session = sessions.create_session(
        db,
        session_id=uuid.uuid4().hex,
        workspace=source.workspace,
        host=source.host,  # the same folder, so the same host
        config=source.config,
        name=name or (f"{source.name} (fork)" if source.name else None),
        owner=source.owner,
        parent_session_id=source_id,
        forked_from_entry_id=entry_id,
        leaf_id=copied[-1].id if copied else None,
    )
    entries.insert_entries(db, session.id, copied)
    display.append_display(
        db,
        session.id,
        None,
        [(e.id, e.message) for e in copied if isinstance(e, MessageEntry)],
    )
    return session
