"""Workers SIGKILLed during a compaction's or a branch summary's model call, and just
after it: the session ends up with exactly one whole compaction (or summary), never a
half or a double."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from support import Stack, assert_valid_pairing, eventually

from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import BranchSummaryEntry, CompactionEntry, LeafEntry, MessageEntry
from duragent.store.tables import StagedMessageRow

BIG = "0123456789 " * 400


def read_steps(n: int) -> list[dict[str, Any]]:
    return [
        {"reply": [{"tool_use": {"name": "read", "input": {"path": f"p{i}.txt"}}}]}
        for i in range(n)
    ]


SUMMARY = {
    "match": "You are compacting",
    "repeat": True,
    "wait_for": "summary",
    "reply": [{"text": "## Goal\nRead the parts."}],
}
TURN_START = {"match": "beginning of a turn", "repeat": True, "reply": [{"text": "Reading."}]}
SCRIPT = {
    "conversations": {"*": [SUMMARY, TURN_START, *read_steps(4), {"reply": [{"text": "ok"}]}]}
}


def summary_requests(stack: Stack, session_id: str) -> int:
    return sum("You are compacting" in str(r.body) for r in stack.model.requests_for(session_id))


def staged_summary(stack: Stack) -> bool:
    with stack.db.transaction() as db:
        rows = db.scalars(select(StagedMessageRow.payload)).all()
    return any(r.get("custom_type") == "compaction_summary" for r in rows)


async def read_everything(stack: Stack) -> str:
    session = await stack.client.sessions.create()
    for i in range(4):
        (Path(session.workspace) / f"p{i}.txt").write_text(BIG)
    worker = stack.spawn_worker()
    result = await asyncio.wait_for(
        (await stack.client.runs.prompt(session.id, "read")).result(), 60
    )
    assert result.status == "completed"
    stack.kill(worker)
    return session.id


async def one_compaction(stack: Stack, session_id: str) -> CompactionEntry:
    """Exactly one compaction, at the leaf, announced once; the transcript still sound."""
    compactions = [
        e for e in await stack.client.tree.entries(session_id) if isinstance(e, CompactionEntry)
    ]
    assert len(compactions) == 1, compactions
    path = await stack.client.tree.path(session_id)
    assert path[-1].id == compactions[0].id
    assert_valid_pairing(path)
    kinds = [e.type async for e in stack.client.events.stream(session_id, follow=False)]
    assert kinds.count("compaction_end") == 1
    messages = [e for e in path if isinstance(e, MessageEntry)]
    # The messages, and the summary's model call once (hidden, for its cost).
    shown = await stack.client.display.messages(session_id)
    assert [d.id for d in shown if d.role == "custom"] == [compactions[0].id]
    assert len(shown) == len(messages) + 1
    return compactions[0]


@pytest.mark.script(SCRIPT)
async def test_worker_killed_during_the_summary_call(stack: Stack) -> None:
    session_id = await read_everything(stack)
    first = stack.spawn_worker()
    compacting = asyncio.create_task(
        stack.client.tree.compact(session_id, settings=CompactionSettings(keep_recent_tokens=1200))
    )
    await eventually(lambda: summary_requests(stack, session_id) == 1, timeout=30)
    stack.kill(first)  # the summary is being written
    second = stack.spawn_worker()
    stack.model.release("summary")
    result = await asyncio.wait_for(compacting, timeout=60)
    stack.kill(second)
    assert result.compacted
    compaction = await one_compaction(stack, session_id)
    assert compaction.id == result.entry_id and compaction.summary.startswith("## Goal")
    assert summary_requests(stack, session_id) >= 2  # asked again after the crash


@pytest.mark.script(SCRIPT)
async def test_worker_killed_just_after_the_summary_was_written(stack: Stack) -> None:
    session_id = await read_everything(stack)
    stack.model.release("summary")
    first = stack.spawn_worker()
    compacting = asyncio.create_task(
        stack.client.tree.compact(session_id, settings=CompactionSettings(keep_recent_tokens=1200))
    )
    await eventually(lambda: staged_summary(stack), timeout=30, interval=0.001)
    stack.kill(first)  # staged, maybe not yet committed
    second = stack.spawn_worker()
    result = await asyncio.wait_for(compacting, timeout=60)
    stack.kill(second)
    assert result.compacted
    assert (await one_compaction(stack, session_id)).id == result.entry_id
    assert not staged_summary(stack)  # nothing left half-done


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "first"}]},
                {"reply": [{"text": "second"}]},
                {
                    "match": "left the following branch",
                    "repeat": True,
                    "wait_for": "branch",
                    "reply": [{"text": "Tried the second way."}],
                },
            ]
        }
    }
)
async def test_worker_killed_during_a_branch_summary(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    worker = stack.spawn_worker()
    for text in ("one way", "another way"):
        await asyncio.wait_for((await stack.client.runs.prompt(session.id, text)).result(), 60)
    path = await stack.client.tree.path(session.id)
    target = path[1]
    navigating = asyncio.create_task(
        stack.client.tree.navigate(session.id, target.id, summarize=True)
    )
    await eventually(
        lambda: any("left the following branch" in str(r.body) for r in stack.model.requests),
        timeout=30,
    )
    stack.kill(worker)
    worker = stack.spawn_worker()
    stack.model.release("branch")
    moved = await asyncio.wait_for(navigating, timeout=60)
    stack.kill(worker)
    entries = await stack.client.tree.entries(session.id)
    summaries = [e for e in entries if isinstance(e, BranchSummaryEntry)]
    markers = [e for e in entries if isinstance(e, LeafEntry)]
    assert len(summaries) == 1 and len(markers) == 1
    assert summaries[0].parent_id == target.id and moved.leaf_id == summaries[0].id
    assert markers[0].parent_id == path[-1].id
    assert [e.id for e in await stack.client.tree.path(session.id)] == [
        path[0].id,
        target.id,
        summaries[0].id,
    ]
    assert sum(isinstance(e, MessageEntry) for e in entries) == 4
