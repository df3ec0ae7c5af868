"""Writes into the session tree: a retried step (its transaction committed, its result
lost with the worker) writes nothing twice and leaves the session's leaf where the first
attempt put it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import store_url
from support import BOTH_STORES

from duragent.activities.models.clients import ModelClients
from duragent.activities.tree_ops import TreeOps
from duragent.domain.config import SessionConfig
from duragent.domain.entries import BranchSummaryEntry, LeafEntry, MessageEntry
from duragent.domain.messages import CustomMessage, TextContent, user_text
from duragent.domain.tree_ops import CommitNavigationInput, PlanNavigationResult
from duragent.store import display, entries, sessions, staging
from duragent.store.append import append_below
from duragent.store.db import Database
from duragent.store.entries import EntryCache


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> Iterator[Database]:
    """A migrated, empty store of the test's kind."""
    store = Database(store_url(request, tmp_path, database))
    yield store
    store.dispose()


def message(entry_id: str, parent_id: str | None = None) -> MessageEntry:
    return MessageEntry(
        id=entry_id, parent_id=parent_id, timestamp=0, message=user_text(entry_id, 0)
    )


def leaf_of(db: Database, session_id: str) -> str | None:
    with db.transaction() as tx:
        return sessions.require_session(tx, session_id).leaf_id


@BOTH_STORES
def test_an_append_done_twice_stores_and_shows_each_entry_once(db: Database) -> None:
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        first = append_below(tx, "s", None, [message("a"), message("b")], run_id="r")
    with db.transaction() as tx:
        again = append_below(tx, "s", None, [message("a"), message("b")], run_id="r")
    assert first.leaf_id == again.leaf_id == "b"
    assert [e.id for e in first.fresh] == ["a", "b"] and again.fresh == []
    with db.transaction() as tx:
        assert [e.parent_id for e in entries.load_path(tx, "b")] == [None, "a"]
        assert [m.id for m in display.list_display(tx, "s")] == ["a", "b"]
        # The leaf moved on after the first attempt: a late retry does not pull it back.
        append_below(tx, "s", "b", [message("c")], run_id="r2")
        append_below(tx, "s", None, [message("a"), message("b")], run_id="r")
    assert leaf_of(db, "s") == "c"


@BOTH_STORES
def test_a_navigation_committed_twice_keeps_its_branch_summary_at_the_leaf(
    db: Database,
) -> None:
    """The summary's staged text is dropped by the first commit; the second attempt must
    still end on the summary, not on the entry it hangs below."""
    with db.transaction() as tx:
        sessions.create_session(tx, session_id="s", workspace="/w", config=SessionConfig(model="m"))
        entries.insert_entries(tx, "s", [message("a"), message("b", "a"), message("c", "b")])
        sessions.set_leaf(tx, "s", "c")
        summary = CustomMessage(
            custom_type="branch_summary",
            content=[TextContent(text="Tried approach B.")],
            display=False,
            timestamp=0,
        )
        staging.stage_message(tx, entry_id="sum", session_id="s", run_id="op", message=summary)
    ops = TreeOps(db, ModelClients(), EntryCache())
    step = CommitNavigationInput(
        session_id="s",
        op_id="op",
        plan=PlanNavigationResult(
            old_leaf_id="c", new_leaf_id="a", abandoned_ids=["b", "c"], model="m"
        ),
        target_entry_id="a",
        marker_id="marker",
        summary_entry_id="sum",
    )
    assert ops.commit_navigation(step) == "sum"
    assert ops.commit_navigation(step) == "sum"  # retried after its commit
    assert leaf_of(db, "s") == "sum"
    with db.transaction() as tx:
        path = entries.load_path(tx, leaf_of(db, "s"))
        stored = entries.list_entries(tx, "s")
    assert [e.id for e in path] == ["a", "sum"]
    assert isinstance(path[-1], BranchSummaryEntry)
    assert path[-1].summary == "Tried approach B."
    assert sum(isinstance(e, LeafEntry) for e in stored) == 1
    assert sum(isinstance(e, BranchSummaryEntry) for e in stored) == 1
