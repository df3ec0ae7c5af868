"""Sessions: one row each, with the latest harness config and the committed leaf.

Read and written with Core statements only (see `store.statements`).
"""

from __future__ import annotations

from sqlalchemy import bindparam, delete, exists, or_, select, update
from sqlalchemy.orm import Session

from duragent.domain.config import SessionConfig
from duragent.store.clock import now_ms
from duragent.store.errors import SessionNotFound
from duragent.store.records import SessionRecord
from duragent.store.statements import execute
from duragent.store.tables import InputQueueRow, RunStateRow, SessionRow, table_of

_sessions = table_of(SessionRow)
# Built once: a turn reads its session and moves its leaf.
_BY_ID = select(_sessions).where(_sessions.c.id == bindparam("id"))
_SET_LEAF = (
    update(_sessions)
    .where(_sessions.c.id == bindparam("sid"))
    .values(leaf_id=bindparam("leaf_id"), updated_at=bindparam("now"))
)


def create_session(
    db: Session,
    *,
    session_id: str,
    workspace: str,
    config: SessionConfig,
    name: str | None = None,
    owner: str | None = None,
    parent_session_id: str | None = None,
    forked_from_entry_id: str | None = None,
    leaf_id: str | None = None,
    parent_run_id: str | None = None,
    parent_tool_call_id: str | None = None,
    host: str | None = None,
    created_at: int | None = None,
) -> SessionRecord:
    """A new session, created now or at `created_at` (an imported one's, kept)."""
    now = now_ms()
    row = SessionRow(
        id=session_id,
        name=name,
        owner=owner,
        workspace=workspace,
        config=config.model_dump(),
        leaf_id=leaf_id,
        parent_session_id=parent_session_id,
        forked_from_entry_id=forked_from_entry_id,
        parent_run_id=parent_run_id,
        parent_tool_call_id=parent_tool_call_id,
        host=host,
        created_at=now if created_at is None else created_at,
        updated_at=now,
    )
    db.add(row)
    db.flush()
    return SessionRecord.model_validate(row)


def get_session(db: Session, session_id: str) -> SessionRecord | None:
    row = execute(db, _BY_ID, {"id": session_id}).first()
    return SessionRecord.model_validate(row) if row else None


def require_session(db: Session, session_id: str) -> SessionRecord:
    record = get_session(db, session_id)
    if record is None:
        raise SessionNotFound(session_id)
    return record


def list_sessions(
    db: Session, *, owner: str | None = None, unowned: bool = False, limit: int = 100
) -> list[SessionRecord]:
    """The newest sessions; of `owner` only when given (and those of no owner, the command
    line's, with `unowned`)."""
    query = select(_sessions).order_by(_sessions.c.updated_at.desc()).limit(limit)
    if owner is not None:
        mine = _sessions.c.owner == owner
        query = query.where(or_(mine, _sessions.c.owner.is_(None)) if unowned else mine)
    return [SessionRecord.model_validate(row) for row in execute(db, query)]


def children(db: Session, session_id: str, *, limit: int = 500) -> list[SessionRecord]:
    """The sub-agent sessions the session's runs started, oldest first, at most `limit`
    (forks are not children: they answer no tool call)."""
    rows = execute(
        db,
        select(_sessions)
        .where(
            _sessions.c.parent_session_id == session_id,
            _sessions.c.parent_tool_call_id.is_not(None),
        )
        .order_by(_sessions.c.created_at, _sessions.c.id)
        .limit(limit),
    )
    return [SessionRecord.model_validate(row) for row in rows]


def depth(db: Session, session_id: str) -> int:
    """How many sub-agent links lie above the session (0: a session a user made)."""
    found, seen = 0, {session_id}
    record = get_session(db, session_id)
    while record is not None and record.parent_tool_call_id and record.parent_session_id:
        if record.parent_session_id in seen:  # a loop would be a bug; do not spin on it
            break
        seen.add(record.parent_session_id)
        found += 1
        record = get_session(db, record.parent_session_id)
    return found


def set_leaf(db: Session, session_id: str, leaf_id: str | None) -> None:
    execute(db, _SET_LEAF, {"sid": session_id, "leaf_id": leaf_id, "now": now_ms()})


def set_session_wide_config(db: Session, session_id: str, config: SessionConfig) -> None:
    """Store `config`'s session-wide settings; the branch-scoped ones stay as they were
    (they change as entries on a path: `domain.config.BRANCH_SCOPED`)."""
    stored = require_session(db, session_id).config.with_session_wide_of(config)
    execute(
        db,
        update(_sessions)
        .where(_sessions.c.id == session_id)
        .values(config=stored.model_dump(), updated_at=now_ms()),
    )


def delete_unused(db: Session, session_id: str) -> bool:
    """Delete the session if nothing was ever stored in it: no entry (its leaf is unset),
    no run, no event, no queued input. True if it was deleted. A run that starts at the
    same moment either finds no session (and fails before doing anything) or has
    recorded itself first (and the session stays)."""
    runs, queued = table_of(RunStateRow), table_of(InputQueueRow)
    deleted = execute(
        db,
        delete(_sessions).where(
            _sessions.c.id == session_id,
            _sessions.c.leaf_id.is_(None),
            _sessions.c.last_event_seq == 0,
            _sessions.c.last_message_seq == 0,
            ~exists().where(runs.c.session_id == session_id),
            ~exists().where(queued.c.session_id == session_id),
        ),
    )
    return bool(deleted.rowcount)


def set_name(db: Session, session_id: str, name: str) -> None:
    execute(
        db,
        update(_sessions)
        .where(_sessions.c.id == session_id)
        .values(name=name, updated_at=now_ms()),
    )


def claim_host(db: Session, session_id: str, host: str) -> str:
    """The session's host: `host` if it had none (recorded now), else the one it has."""
    execute(
        db,
        update(_sessions)
        .where(_sessions.c.id == session_id, _sessions.c.host.is_(None))
        .values(host=host),
    )
    return require_session(db, session_id).host or host


def set_host(db: Session, session_id: str, host: str | None, *, workspace: str) -> None:
    """The session works on `host` now, in `workspace` there (`duragent move`)."""
    execute(
        db,
        update(_sessions)
        .where(_sessions.c.id == session_id)
        .values(host=host, workspace=workspace, updated_at=now_ms()),
    )
