"""`duragent prune`: sessions idle past a cutoff go whole, with their sub-agents'; a session
with something open stays; `--events-only` drops old events and keeps conversations and
costs; named sessions go by id; leftovers go every time; bad input deletes nothing.

Real runs on the real stack make the sessions; `backdate` then moves their rows' times
back, as if the days had passed (the store's clock is the machine's)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import bindparam, func, select, update
from support import BOTH_STORES, Stack, event_seen, eventually, run_finished

from duragent.client.retention import Retention
from duragent.domain.messages import AssistantMessage, TextContent
from duragent.domain.questions import ASK_USER_TOOL
from duragent.domain.subagents import DELEGATE_TOOL
from duragent.store import cancel_hints, staging, triggers
from duragent.store.clock import now_ms
from duragent.store.tables import (
    CancelHintRow,
    DisplayMessageRow,
    EntryRow,
    InputQueueRow,
    RunEventRow,
    RunStateRow,
    SessionRow,
    StagedMessageRow,
    TriggerDeliveryRow,
    table_of,
)

DAY_MS = 86_400_000
SESSION_TABLES = {
    "run_events": RunEventRow,
    "display_messages": DisplayMessageRow,
    "session_entries": EntryRow,
    "run_states": RunStateRow,
    "input_queue": InputQueueRow,
    "staged_messages": StagedMessageRow,
}
TIMES = {
    "sessions": ("created_at", "updated_at"),
    "run_states": ("started_at", "updated_at", "ended_at"),
    "run_events": ("created_at",),
    "display_messages": ("created_at",),
    "input_queue": ("created_at", "updated_at", "consumed_at"),
    "staged_messages": ("created_at",),
}
MODELS = {
    "sessions": SessionRow,
    "run_states": RunStateRow,
    "run_events": RunEventRow,
    "display_messages": DisplayMessageRow,
    "input_queue": InputQueueRow,
    "staged_messages": StagedMessageRow,
}


def text(value: str) -> dict[str, Any]:
    return {"reply": [{"text": value}]}


def tool(name: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
    call = {"name": name, "input": args} | ({"id": call_id} if call_id else {})
    return {"reply": [{"tool_use": call}]}


SCRIPT = {"conversations": {"*": [{"match": "^Child", "reply": [{"text": "child answer"}]}]}}
"""Sub-agents answer from "*"; each test session plays its own steps (`plays`)."""


def plays(stack: Stack, session_id: str, steps: list[dict[str, Any]]) -> None:
    stack.model.add_steps(session_id, steps, replace=True)


def backdate(stack: Stack, session_ids: list[str], days: int, run_id: str | None = None) -> None:
    """As if the sessions' rows (or only those of `run_id`, and the sessions' creation) had
    been written `days` days earlier."""
    shift = days * DAY_MS
    with stack.db.transaction() as db:
        for name, columns in TIMES.items():
            table = table_of(MODELS[name])
            if run_id is not None and name == "sessions":
                columns = ("created_at",)
            key = table.c.id if name == "sessions" else table.c.session_id
            statement = update(table).where(key.in_(bindparam("ids", expanding=True)))
            if run_id is not None and name != "sessions":
                if "run_id" not in table.c:
                    continue
                statement = statement.where(table.c.run_id == run_id)
            db.execute(
                statement.values({c: table.c[c] - shift for c in columns}), {"ids": session_ids}
            )


def rows_of(stack: Stack, session_ids: list[str]) -> dict[str, int]:
    """The rows the sessions hold in every table that keys rows by session."""
    found: dict[str, int] = {}
    with stack.db.transaction() as db:
        for name, model in {**SESSION_TABLES, "sessions": SessionRow}.items():
            table = table_of(model)
            key = table.c.id if name == "sessions" else table.c.session_id
            counted = select(func.count()).select_from(table).where(key.in_(session_ids))
            found[name] = int(db.scalar(counted) or 0)
    return found


def table_line(out: str, table: str) -> int:
    """The count a report prints for `table`."""
    (line,) = [line for line in out.splitlines() if line.strip().startswith(f"{table} ")]
    return int(line.split()[-1].replace(",", ""))


async def finished(stack: Stack, session_id: str, steps: list[dict[str, Any]], prompt: str) -> None:
    plays(stack, session_id, steps)
    await (await stack.client.runs.prompt(session_id, prompt)).result()


@pytest.mark.script(SCRIPT)
@BOTH_STORES
async def test_prune_older_than_deletes_idle_sessions_whole_and_keeps_what_is_open(
    stack: Stack,
) -> None:
    old = await stack.client.sessions.create(name="old")
    asking = await stack.client.sessions.create(name="asking")
    recent = await stack.client.sessions.create(name="recent")
    triggered = await stack.client.sessions.create(name="triggered")
    unstarted = await stack.client.sessions.create(name="unstarted")
    async with stack.worker():
        await finished(
            stack,
            old.id,
            [tool(DELEGATE_TOOL, prompt="Child: say hi"), text("old done")],
            "delegate it",
        )
        await finished(stack, recent.id, [tool("bash", command="echo kept"), text("one")], "go")
        await finished(stack, triggered.id, [text("triggered done")], "go")
        await stack.client.config.set_active_tools(asking.id, ["ls", ASK_USER_TOOL])
        plays(
            stack,
            asking.id,
            [
                tool(ASK_USER_TOOL, "call_ask", question="Which database?", choices=["a", "b"]),
                text("ok"),
            ],
        )
        await stack.client.runs.prompt(asking.id, "ask me")
        await eventually(lambda: event_seen(stack, asking.id, "question_asked"), timeout=60)
    # No worker: Temporal holds this run, the store has no trace of it yet.
    plays(stack, unstarted.id, [text("late but whole")])
    await stack.client.runs.prompt(unstarted.id, "start when you can")
    (child,) = stack.client.sync.sessions.children(old.id)
    trigger = await stack.client.triggers.add("hook", "{body}", session_id=triggered.id)
    backdate(stack, [old.id, child.id, asking.id, triggered.id, unstarted.id], days=40)
    before = rows_of(stack, [old.id, child.id])
    assert before["run_events"] > 0 and before["session_entries"] > 0
    everything = [old.id, child.id, asking.id, recent.id, triggered.id, unstarted.id]
    all_before = rows_of(stack, everything)
    kept_before = rows_of(stack, [asking.id, recent.id, triggered.id, unstarted.id])
    recent_path = stack.client.sync.tree.path(recent.id)

    code, out, err = await stack.cli("prune", "--older-than", "30d", "--dry-run")
    assert code == 0, err
    assert "Would delete 1 session last active before" in out, out
    assert "with 1 sub-agent session; rows per table:" in out, out
    for table in (*SESSION_TABLES, "sessions"):
        assert table_line(out, table) == before[table], (table, out)
    assert "Kept 3 sessions:" in out, out
    assert f"{asking.id}: a run is open (run " in out and "awaiting input" in out, out
    assert f"{triggered.id}: trigger {trigger.trigger.id} sends it prompts" in out, out
    assert f"{unstarted.id}: workflow session-{unstarted.id} (SessionRun) is open" in out, out
    assert "Nothing was deleted (--dry-run)." in out
    assert rows_of(stack, everything) == all_before

    code, out, err = await stack.cli("prune", "--older-than", "30d")
    assert code == 0, err
    assert "Deleted 1 session last active before" in out, out
    assert table_line(out, "run_events") == before["run_events"], out
    assert "Kept 3 sessions:" in out, out
    listed = await stack.cli_ok("sessions")
    assert old.id not in listed and child.id not in listed
    assert all(s.id in listed for s in (asking, recent, triggered, unstarted)), listed
    for gone in (old.id, child.id):
        code, _, err = await stack.cli("show", gone)
        assert code == 2 and f"error: session '{gone}' does not exist" in err, err
    assert set(rows_of(stack, [old.id, child.id]).values()) == {0}
    kept = [asking.id, recent.id, triggered.id, unstarted.id]
    assert rows_of(stack, kept) == kept_before
    assert stack.client.sync.tree.path(recent.id) == recent_path

    async with stack.worker():
        # The kept sessions work as before: the recent one runs a turn, the run nobody
        # had started runs now, the question still waits and takes its answer.
        await finished(stack, recent.id, [text("two")], "again")
        assert "two" in await stack.cli_ok("show", recent.id)
        await eventually(lambda: run_finished(stack, unstarted.id), timeout=60)
        assert stack.client.sync.runs.list(unstarted.id)[0].status == "completed"
        await stack.client.questions.answer(asking.id, "call_ask", "a")
        await eventually(lambda: run_finished(stack, asking.id), timeout=60)
    assert stack.client.sync.runs.list(asking.id)[0].status == "completed"


@pytest.mark.script(SCRIPT)
@BOTH_STORES
async def test_prune_events_only_keeps_conversations_and_costs(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await finished(stack, session.id, [tool("bash", command="echo a"), text("first")], "one")
        (first,) = stack.client.sync.runs.list(session.id)
        await finished(stack, session.id, [text("second")], "two")
    backdate(stack, [session.id], days=40, run_id=first.run_id)
    shown = await stack.cli_ok("show", session.id)
    costs = await stack.client.sessions.costs(session.id)
    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    old = [e for e in events if e.run_id == first.run_id]
    assert old and len(old) < len(events)

    code, out, err = await stack.cli("prune", "--older-than", "30d", "--events-only", "--dry-run")
    assert code == 0, err
    assert f"Would delete {len(old)} run events from before" in out and "in 1 session;" in out, out
    assert len([e async for e in stack.client.events.stream(session.id, follow=False)]) == len(
        events
    )

    code, out, err = await stack.cli("prune", "--older-than", "30d", "--events-only")
    assert code == 0, err
    assert f"Deleted {len(old)} run events from before" in out, out
    left = [e async for e in stack.client.events.stream(session.id, follow=False)]
    assert [e.seq for e in left] == [e.seq for e in events if e.run_id != first.run_id]
    assert await stack.cli_ok("show", session.id) == shown
    assert await stack.client.sessions.costs(session.id) == costs
    async with stack.worker():
        await finished(stack, session.id, [text("third")], "three")
    after = [e async for e in stack.client.events.stream(session.id, follow=False)]
    assert after[-1].seq > events[-1].seq  # numbering goes on past the deleted ones


@pytest.mark.script(SCRIPT)
@BOTH_STORES
async def test_prune_session_by_id_and_bad_input_deletes_nothing(stack: Stack) -> None:
    parent = await stack.client.sessions.create()
    other = await stack.client.sessions.create()
    async with stack.worker():
        await finished(
            stack, parent.id, [tool(DELEGATE_TOOL, prompt="Child: hi"), text("ok")], "go"
        )
        await finished(stack, other.id, [text("kept")], "go")
    (child,) = stack.client.sync.sessions.children(parent.id)
    everything = [parent.id, child.id, other.id]
    before = rows_of(stack, everything)
    other_before = rows_of(stack, [other.id])
    refused = {
        ("--session", "nope"): "error: session 'nope' does not exist in the store at",
        ("--older-than", "banana"): "error: --older-than: an age is a number and a unit: s, m, "
        "h, d or w (30d, 12h, 90m) (got 'banana')",
        ("--older-than=-5d",): "error: --older-than: cannot be negative (got '-5d')",
        (): "error: say what to prune: --older-than AGE",
        ("--older-than", "1d", "--session", parent.id): "error: give --older-than AGE or "
        "--session ID, not both",
        ("--events-only", "--session", parent.id): "error: --events-only deletes the run "
        "events older than --older-than AGE",
        ("--session", parent.id, "--session", child.id): f"error: session {child.id} cannot "
        f"be pruned: it is the session of a sub-agent of session {parent.id}",
    }
    for args, message in refused.items():
        code, _, err = await stack.cli("prune", *args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)
    assert rows_of(stack, everything) == before

    code, out, err = await stack.cli("prune", "--session", parent.id)
    assert code == 0, err
    assert f"Deleted session {parent.id}, with 1 sub-agent session; rows per table:" in out, out
    assert (
        table_line(out, "session_entries")
        == before["session_entries"] - other_before["session_entries"]
    )
    assert set(rows_of(stack, [parent.id, child.id]).values()) == {0}
    assert rows_of(stack, [other.id]) == other_before
    code, _, err = await stack.cli("show", parent.id)
    assert code == 2 and f"session '{parent.id}' does not exist" in err


@BOTH_STORES
async def test_prune_drops_leftovers_and_works_in_bounded_transactions(stack: Stack) -> None:
    idle = await stack.client.sessions.create()
    kept = await stack.client.sessions.create()
    plays(stack, idle.id, [text(f"reply {i}") for i in range(4)])
    async with stack.worker():
        for i in range(4):
            await (await stack.client.runs.prompt(idle.id, f"prompt {i}")).result()
        await finished(stack, kept.id, [text("kept")], "go")
    (ended,) = stack.client.sync.runs.list(kept.id)
    now = now_ms()
    with stack.db.transaction() as db:
        # What a model call's attempt that outlived its run leaves: a staged reply no save
        # point will take.
        staging.stage_message(
            db,
            entry_id="late-reply",
            session_id=kept.id,
            run_id=ended.run_id,
            message=AssistantMessage(content=[TextContent(text="late")], timestamp=now),
        )
        cancel_hints.add_hints(db, [("w", "r", "a")], "old-process", now - 120_000)
        cancel_hints.add_hints(db, [("w", "r", "b")], "new-process", now)
        trigger = triggers.add_trigger(
            db,
            trigger_id="t1",
            owner=None,
            name="hook",
            secret="s",
            session_id=None,
            template="{body}",
            at_ms=now,
        )
        triggers.remember_delivery(db, trigger.id, "old", "sig-old", now - 8 * DAY_MS)
        triggers.remember_delivery(db, trigger.id, "new", "sig-new", now)
    backdate(stack, [idle.id], days=40)
    events = rows_of(stack, [idle.id])["run_events"]
    assert events > 10

    report = await Retention(stack.client).prune_idle(30 * DAY_MS, batch=5)
    assert report.sessions == [idle.id]
    assert report.rows["run_events"] == events
    # The events five at a time, a transaction each, then the rest in one.
    assert report.transactions >= -(-events // 5) + 1
    assert dict(report.leftovers) == {
        "staged_messages": 1,
        "cancel_hints": 1,
        "trigger_deliveries": 1,
    }
    with stack.db.transaction() as db:
        assert db.scalar(select(func.count()).select_from(StagedMessageRow)) == 0
        assert db.scalars(select(CancelHintRow.activity_id)).all() == ["b"]
        assert db.scalars(select(TriggerDeliveryRow.delivery_id)).all() == ["new"]
    assert rows_of(stack, [kept.id])["sessions"] == 1
