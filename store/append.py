"""The one way entries join a session's tree: append a chain below an entry, move the leaf.

Every writer of the tree (the save point, the start and end of a run, changes to an idle
session, a compaction) goes through `append_below`. Entry ids are chosen before the
write (by the workflow or the caller), so a retried step finds its entries stored and
writes nothing twice: neither entries, nor display messages, nor a leaf move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from duragent.domain.context import entry_messages, summary_call
from duragent.domain.entries import CustomMessageEntry, MessageEntry, SessionEntry, SessionInfoEntry
from duragent.domain.messages import AgentMessage
from duragent.store import display, entries, sessions


@dataclass(frozen=True)
class Appended:
    leaf_id: str | None
    """The last entry of the chain (`parent_id` for an empty one)."""
    committed: list[SessionEntry]
    """The whole chain, linked below `parent_id`: what is stored now."""
    fresh: list[SessionEntry]
    """The part of it this call stored (empty when a retry finds it all stored)."""


def append_below(
    db: Session,
    session_id: str,
    parent_id: str | None,
    items: Sequence[SessionEntry],
    *,
    run_id: str | None,
    cache: entries.EntryCache | None = None,
    known: Mapping[str, bool] | None = None,
) -> Appended:
    """Link `items` one after another below `parent_id`, store those not stored yet, show
    their messages, and move the session leaf to the chain's end. With `cache`, the chain
    and its path are remembered there. `known` says of ids the caller already looked up
    in this transaction whether each is stored; the others are looked up here.

    When everything was stored before, the leaf stays where it is: the first attempt
    moved it, and it may have moved on since.
    """
    committed = chain(parent_id, items)
    known = known or {}
    done = {i for i, stored in known.items() if stored}
    done |= entries.existing_ids(db, [e.id for e in committed if e.id not in known])
    fresh = [e for e in committed if e.id not in done]
    entries.insert_entries(db, session_id, fresh, run_id=run_id)
    for entry in fresh:
        if isinstance(entry, SessionInfoEntry):
            sessions.set_name(db, session_id, entry.name)
    if cache is not None:
        cache.extend(parent_id, committed)
    leaf_id = committed[-1].id if committed else parent_id
    shown = displayed(fresh)
    if fresh and not shown:
        sessions.set_leaf(db, session_id, leaf_id)
    # Shown messages are numbered in the statement that moves the leaf (fresh entries
    # end in one: `leaf_id`).
    display.append_display(db, session_id, run_id, shown, leaf_id=leaf_id if shown else None)
    return Appended(leaf_id=leaf_id, committed=committed, fresh=fresh)


def chain(parent_id: str | None, items: Sequence[SessionEntry]) -> list[SessionEntry]:
    """The entries linked one after another below `parent_id`."""
    linked: list[SessionEntry] = []
    for entry in items:
        linked.append(entry.model_copy(update={"parent_id": parent_id}))
        parent_id = entry.id
    return linked


def displayed(items: Sequence[SessionEntry]) -> list[tuple[str, AgentMessage]]:
    """The chat messages among entries: every message, custom messages marked display,
    and the summaries a model call wrote (hidden, but their usage is part of the cost)."""
    shown: list[tuple[str, AgentMessage]] = []
    for entry in items:
        if isinstance(entry, MessageEntry) or (
            isinstance(entry, CustomMessageEntry) and entry.display
        ):
            shown += [(entry.id, message) for message in entry_messages(entry)]
        elif (call := summary_call(entry)) is not None:
            shown.append((entry.id, call))
    return shown
