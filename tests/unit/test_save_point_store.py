"""The save point's store work: committing a turn twice changes nothing, and the
finished replies a worker remembers never differ from what the store holds."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import store_url
from sqlalchemy import text
from support import BOTH_STORES

from duragent.activities.save_point import save_point
from duragent.domain.config import SessionConfig
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import (
    AssistantMessage,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    user_text,
)
from duragent.domain.save_points import CommitSlot, TurnCommit, result_entry_id
from duragent.store import display, entries, events, runs, sessions, staging
from duragent.store.append import append_below
from duragent.store.db import Database
from duragent.store.errors import EntrySaved
from duragent.store.staging import FinishedReplies


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path: Path, database: str) -> Iterator[Database]:
    """A migrated store of the test's kind, with session `s` (a prompt `p`) and run `r`."""
    store = Database(store_url(request, tmp_path, database))
    with store.transaction() as tx:
        sessions.create_session(
            tx, session_id="s", workspace=str(tmp_path / "ws"), config=SessionConfig(model="m")
        )
        runs.insert_run(tx, run_id="r", session_id="s", workflow_id="w")
        prompt = MessageEntry(id="p", parent_id=None, timestamp=0, message=user_text("go", 0))
        append_below(tx, "s", None, [prompt], run_id="r")
    yield store
    store.dispose()


def reply(*calls: str, stop_reason: StopReason = "toolUse") -> AssistantMessage:
    return AssistantMessage(
        content=[
            TextContent(text="Reading."),
            *(ToolCall(id=c, name="read", arguments={"path": f"{c}.txt"}) for c in calls),
        ],
        model="m",
        stop_reason=stop_reason,
        timestamp=1,
    )


def stage(db: Database, entry_id: str, message: AssistantMessage | ToolResultMessage) -> None:
    with db.transaction() as tx:
        staging.stage_message(tx, entry_id=entry_id, session_id="s", run_id="r", message=message)


State = tuple[str | None, list[dict[str, Any]], list[Any], list[Any], dict[str, Any]]


def stored_state(db: Database) -> State:
    with db.transaction() as tx:
        return (
            sessions.require_session(tx, "s").leaf_id,
            [e.model_dump() for e in entries.list_entries(tx, "s")],
            [(m.seq, m.id, m.message) for m in display.list_display(tx, "s")],
            [(e.seq, e.type, e.payload) for e in events.read_events(tx, "s")],
            staging.staged_messages(tx, ["a", "t1", "t2"]),
        )


@BOTH_STORES
def test_a_save_point_committed_twice_changes_nothing(db: Database) -> None:
    """The second run (a retried activity) stores, shows and emits nothing again and
    leaves the leaf where the first put it, also with a call left without a result (its
    error result is made up again) and a pending write after the turn."""
    stage(db, "a", reply("c1", "c2"))
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="read", content=[TextContent(text="x")], timestamp=2
    )
    stage(db, "t1", result)
    written = MessageEntry(id="w", parent_id=None, timestamp=3, message=user_text("later", 3))
    commit = TurnCommit(
        turn=1,
        slots=[CommitSlot(entry_id="a"), CommitSlot(entry_id="t1")],
        entries=[written],
        usage=Usage(input_tokens=5),
    )
    with db.transaction() as tx:
        leaf = save_point(tx, session_id="s", run_id="r", parent_id="p", data=commit)
    first = stored_state(db)
    assert leaf == "w" == first[0]
    ids = [e["id"] for e in first[1]]
    assert ids[:3] == ["p", "a", "t1"] and ids[-1] == "w" and len(ids) == 5  # + c2's error
    # The session moved on meanwhile; the retried save point must not move it back.
    later = MessageEntry(id="n", parent_id=None, timestamp=4, message=user_text("next", 4))
    with db.transaction() as tx:
        append_below(tx, "s", "w", [later], run_id="r")
    moved_on = stored_state(db)
    with db.transaction() as tx:
        again = save_point(tx, session_id="s", run_id="r", parent_id="p", data=commit)
    assert again == "w"
    assert stored_state(db) == moved_on


@BOTH_STORES
def test_a_message_staged_for_a_saved_entry_is_refused(db: Database) -> None:
    """Once a turn is saved (its staged messages dropped), staging for one of its entries
    is a stale attempt's (taken for lost, then continued): refused, and nothing is staged."""
    stage(db, "a", reply("c1"))
    commit = TurnCommit(turn=1, slots=[CommitSlot(entry_id="a")], usage=Usage())
    with db.transaction() as tx:
        save_point(tx, session_id="s", run_id="r", parent_id="p", data=commit)
    with pytest.raises(EntrySaved, match="'a' was saved already"):
        stage(db, "a", reply("c9"))
    result = ToolResultMessage(
        tool_call_id="c1", tool_name="read", content=[TextContent(text="x")], timestamp=2
    )
    with pytest.raises(EntrySaved):  # the made-up result of c1 is stored under its id
        stage(db, result_entry_id("a", "c1"), result)
    assert stored_state(db)[4] == {}


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
def test_a_staging_waits_for_a_save_point_under_way(db: Database) -> None:
    """A stale attempt stages while the save point of its turn is under way: it waits
    for the save point's transaction (the session's numbering lock), then finds the entry
    stored, instead of staging a message the save point has not seen."""
    commit = TurnCommit(turn=1, slots=[CommitSlot(entry_id="a", fallback=reply())], usage=Usage())
    outcome: list[BaseException | None] = []
    with db.transaction() as tx:
        save_point(tx, session_id="s", run_id="r", parent_id="p", data=commit)

        def stale() -> None:
            try:
                stage(db, "a", reply("c1"))
                outcome.append(None)
            except BaseException as err:  # the outcome is what the test checks
                outcome.append(err)

        staging_thread = threading.Thread(target=stale)
        staging_thread.start()
        wait_until(lambda: lock_waits(db) == 1)
    staging_thread.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], EntrySaved)


def lock_waits(db: Database) -> int:
    """How many connections to the store's database wait for a lock (PostgreSQL; other
    tests' databases on the server do not count)."""
    with db.engine.connect() as connection:
        statement = text(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return int(connection.execute(statement).scalar_one())


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_remembered_replies_are_final_ones_only() -> None:
    """What could still be replaced in the store (an aborted or failed reply), or was put
    twice with different content, is never handed out."""
    replies = FinishedReplies(capacity=2)
    replies.put("aborted", reply("c", stop_reason="aborted"))
    replies.put("error", reply("c", stop_reason="error"))
    assert replies.get("aborted") is None and replies.get("error") is None
    replies.put("a", reply("c1"))
    replies.put("a", reply("c2"))
    assert replies.get("a") is None
    replies.put("b", reply("c1"))
    replies.put("c", reply("c1"))
    replies.put("d", reply("c1"))
    assert replies.get("b") is None and replies.get("d") == reply("c1")  # bounded


TOOL_LOAD = """
import json, sys
from pathlib import Path
from duragent.activities.extensions import Extensions
from duragent.activities.orphans import ProcessRecords
from duragent.activities.tool_call import ToolCalls
from duragent.activities.tools import ToolRegistry, default_tools
from duragent.domain.tools import ToolCallRef
from duragent.domain.turns import ToolCallInput
from duragent.store.db import Database
from duragent.store.errors import EntrySaved

url, records = sys.argv[1:]
registry = ToolRegistry(default_tools())
calls = ToolCalls(Database(url), registry, Extensions(), ProcessRecords(Path(records)))
call = ToolCallRef(id="c2", name="read", args_preview="")
data = ToolCallInput(session_id="s", run_id="r", turn=1, assistant_entry_id="a",
                     result_entry_id="t2", call=call)
_, _, found = calls._load(data, None, None)
print(json.dumps(found.arguments if found else None))
"""


@BOTH_STORES
def test_a_tool_call_in_another_worker_process_reads_its_arguments_from_the_store(
    db: Database, tmp_path: Path
) -> None:
    """The reply was staged by this process; a worker process that did not stage it
    finds the call's full arguments in the store."""
    message = reply("c1", "c2")
    stage(db, "a", message)
    loaded = subprocess.run(
        [sys.executable, "-c", TOOL_LOAD, db.url, str(tmp_path / "records")],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    assert json.loads(loaded.stdout) == {"path": "c2.txt"}


@BOTH_STORES
def test_a_finished_reply_staged_first_is_kept_over_a_late_attempts(db: Database) -> None:
    """Attempt 1 of a model call runs on a worker taken for lost; attempt 2 finishes and
    stages its reply, and the workflow acts on its tool calls. When attempt 1 finishes
    later, its reply must not replace the one the workflow acted on: it gets that one
    back. An aborted or failed partial reply is still replaced by a finished one, and a
    tool result by a later attempt's."""
    first, late = reply("a"), reply("b")
    with db.transaction() as tx:
        assert staging.stage_message(tx, entry_id="m", session_id="s", run_id="r", message=first)
    with db.transaction() as tx:
        kept = staging.stage_message(tx, entry_id="m", session_id="s", run_id="r", message=late)
    assert kept == first
    with db.transaction() as tx:
        assert staging.staged_message(tx, "m") == first

    partial = reply(stop_reason="aborted")
    stage(db, "n", partial)
    with db.transaction() as tx:
        again = staging.stage_message(tx, entry_id="n", session_id="s", run_id="r", message=late)
    assert again == late

    result = ToolResultMessage(
        tool_call_id="a", tool_name="read", content=[TextContent(text="one")], timestamp=2
    )
    retried = result.model_copy(update={"content": [TextContent(text="two")]})
    stage(db, "t", result)
    stage(db, "t", retried)
    with db.transaction() as tx:
        assert staging.staged_message(tx, "t") == retried


@BOTH_STORES
def test_an_aborted_runs_end_counts_and_follows_the_compaction_stored_as_it_stopped(
    db: Database,
) -> None:
    """A stop reached the run while its compaction's commit was under way, and the
    commit stored the summary: the end saves below the compaction and counts its call."""
    from duragent.activities.bookkeeping import Bookkeeping
    from duragent.activities.extensions import Extensions
    from duragent.activities.snapshots import SnapshotTaker
    from duragent.domain.entries import CompactionEntry
    from duragent.domain.fallbacks import abort_marker
    from duragent.domain.turns import FinishRunInput

    summary_usage = Usage(input_tokens=12_538, output_tokens=114)
    compaction = CompactionEntry(
        id="c",
        parent_id="p",
        timestamp=1,
        summary="## Goal",
        first_kept_entry_id="p",
        tokens_before=20_000,
        model="m",
        usage=summary_usage,
    )
    with db.transaction() as tx:
        append_below(tx, "s", "p", [compaction], run_id="r")
    extensions = Extensions()
    bookkeeping = Bookkeeping(db, extensions, SnapshotTaker(extensions))
    marker = abort_marker("m1", 2)
    counted = Usage(input_tokens=12_441, output_tokens=49)
    commit = TurnCommit(turn=3, slots=[], entries=[marker], usage=counted, continues=False)
    finished = bookkeeping.finish_run(
        FinishRunInput(
            session_id="s",
            run_id="r",
            status="aborted",
            turns=3,
            usage=counted,
            parent_id="p",
            commits=[commit],
            compaction_id="c",
        )
    )
    assert finished.usage == counted.plus(summary_usage)
    with db.transaction() as tx:
        record = runs.get_run(tx, "r")
        assert record is not None and record.usage == counted.plus(summary_usage)
        path = [e.id for e in entries.load_path(tx, finished.leaf_id)]
    assert path == ["p", "c", "m1"]


@BOTH_STORES
@pytest.mark.parametrize("status", ["aborted", "error"])
def test_guidance_a_turn_took_but_never_injected_is_not_lost_at_the_runs_end(
    db: Database, status: str
) -> None:
    """A turn's activity took guidance from the queue, then the run ended before the
    workflow injected it (a stop as the activity returned; a host gone): stopped, it is
    cancelled as the rest of the input is; otherwise it starts the next run."""
    from duragent.activities.bookkeeping import Bookkeeping
    from duragent.activities.extensions import Extensions
    from duragent.activities.snapshots import SnapshotTaker
    from duragent.domain.turns import FinishRunInput
    from duragent.store import input_queue

    with db.transaction() as tx:
        input_queue.add_item(
            tx, item_id="g1", session_id="s", kind="next_turn", message=user_text("note it", 1)
        )
        assert input_queue.guide(tx, "g1", "r", "supplement")
        assert input_queue.take_guidance(tx, "r", ["g1"]) == ["g1"]
    extensions = Extensions()
    finished = Bookkeeping(db, extensions, SnapshotTaker(extensions)).finish_run(
        FinishRunInput(
            session_id="s", run_id="r", status=status, turns=1, usage=Usage(), parent_id="p"
        )
    )
    with db.transaction() as tx:
        item = input_queue.get_item(tx, "g1")
    assert item is not None
    if status == "aborted":
        assert item.status == "cancelled" and finished.cancelled_inputs == ["note it"]
        assert not finished.queued_input
    else:
        assert (item.kind, item.status, item.starts_run) == ("next_turn", "pending", True)
        assert finished.queued_input
