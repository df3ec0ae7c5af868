"""Numbering and commit order for the tables clients read from a cursor (`seq > cursor`).

Display messages and run events are numbered per session, 1, 2, 3, ...: a cursor says
nothing about other sessions (a global sequence would tell any user how busy everyone
else is). The numbers come from counters on the session's row, bumped with
`UPDATE ... RETURNING` in the transaction that inserts the rows.

A client that has read up to `seq` N never looks below N again, so a row must not become
visible after a row with a higher `seq` of the same session. The counter's row lock
gives that: on PostgreSQL a second writer of the session waits at its own `UPDATE` until
the first commits (and then reads the committed counter), so numbers are handed out in
commit order; SQLite has one writer at a time, and the `UPDATE` takes the write lock.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Update, bindparam, update

from duragent.store.clock import now_ms
from duragent.store.errors import SessionNotFound
from duragent.store.statements import Tx, execute
from duragent.store.tables import SessionRow, table_of

Numbering = Literal["messages", "events"]


def _take(counter: str, *, moving_leaf: bool = False) -> Update:
    sessions = table_of(SessionRow)
    column = sessions.c[counter]
    values = {column: column + bindparam("count")}
    if moving_leaf:
        values |= {
            sessions.c.leaf_id: bindparam("leaf_id"),
            sessions.c.updated_at: bindparam("now"),
        }
    return (
        update(sessions).where(sessions.c.id == bindparam("sid")).values(values).returning(column)
    )


# Built once: building the statement on each call cost more than running it.
_TAKE = {"messages": _take("last_message_seq"), "events": _take("last_event_seq")}
_TAKE_MOVING_LEAF = {
    "messages": _take("last_message_seq", moving_leaf=True),
    "events": _take("last_event_seq", moving_leaf=True),
}


def take_numbers(
    db: Tx, session_id: str, numbering: Numbering, count: int, *, leaf_id: str | None = None
) -> int:
    """Hand out `count` consecutive numbers of the session's `numbering`; the first.
    With `leaf_id`, the session's leaf moves there in the same statement (as
    `sessions.set_leaf` would: a save point does both, and saves a round trip).

    Holds the session's numbering lock until this transaction ends: call it in the
    transaction that inserts the rows, and insert them all (a number taken and not used
    leaves a gap, which readers tolerate, but nothing else does).
    """
    params: dict[str, object] = {"sid": session_id, "count": count}
    if leaf_id is not None:
        params |= {"leaf_id": leaf_id, "now": now_ms()}
    statement = (_TAKE if leaf_id is None else _TAKE_MOVING_LEAF)[numbering]
    last = execute(db, statement, params).scalar_one_or_none()
    if last is None:
        raise SessionNotFound(session_id)
    return int(last) - count + 1


def hold_numbering(db: Tx, session_id: str) -> None:
    """Take the session's numbering lock (as `take_numbers` does, taking no number) until
    this transaction ends. A save point takes it before it reads what is staged, and a
    staging before it writes, so the two never interleave (`store.staging.stage_message`);
    on SQLite it also makes the transaction a writer from its first statement, so its
    reads and writes see one state of the file."""
    take_numbers(db, session_id, "events", 0)
