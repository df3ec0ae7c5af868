"""The session tree: compaction (manual, auto, on overflow), navigation, forks, labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import wire
from support import (
    BOTH_PROTOCOLS,
    ApiServer,
    Stack,
    assert_valid_pairing,
    eventually,
    run_finished,
    transcript_roles,
)

from duragent.client.errors import SessionBusy
from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import BranchSummaryEntry, CompactionEntry, LeafEntry, MessageEntry
from duragent.domain.messages import UserMessage, text_of

BIG = "0123456789 " * 400  # about 4.4 KB, some 1100 tokens
SUMMARY = {
    "match": "You are compacting",
    "reply": [{"text": "## Goal\nRead the parts.\n## Progress\nRead parts 0 to 2."}],
}
TURN_START = {
    "match": "beginning of a turn",
    "reply": [{"text": "The user asked to read the parts."}],
}


def reads(n: int) -> list[dict[str, Any]]:
    return [
        {"reply": [{"tool_use": {"name": "read", "input": {"path": f"part{i}.txt"}}}]}
        for i in range(n)
    ]


def write_parts(workspace: str, n: int = 6) -> None:
    for i in range(n):
        (Path(workspace) / f"part{i}.txt").write_text(BIG)


def sent_texts(body: dict[str, Any]) -> list[str]:
    """Every text the model was sent, tool results included, in order."""
    texts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
            continue
        texts += [block.get("text") or str(block.get("content", "")) for block in content]
    return texts


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                *reads(4),
                {"reply": [{"text": "read them"}]},
                SUMMARY,
                {"reply": [{"text": "still here"}]},
            ]
        }
    }
)
async def test_manual_compaction_keeps_the_display_history(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as http:
        session = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        write_parts((await stack.client.sessions.get(session)).workspace)
        await http.post(f"/api/sessions/{session}/input", json={"text": "read all parts"})
        await eventually(lambda: run_finished(stack, session))
        before = (await http.get(f"/api/sessions/{session}/state")).json()["messages"]
        result = await stack.client.tree.compact(
            session, settings=CompactionSettings(keep_recent_tokens=2000), instructions="be brief"
        )
        assert result.compacted and result.tokens_before > 4000
        path = await stack.client.tree.path(session)
        compaction = path[-1]
        assert isinstance(compaction, CompactionEntry) and compaction.id == result.entry_id
        assert compaction.summary.startswith("## Goal")
        assert "## Files read\n- part0.txt" in compaction.summary
        summary_request = stack.model.requests_for(session)[5].body
        assert "be brief" in summary_request["messages"][0]["content"]
        await http.post(f"/api/sessions/{session}/input", json={"text": "are you there?"})
        await eventually(
            lambda: [r.status for r in stack.client.sync.runs.list(session)] == ["completed"] * 2
        )
        after = (await http.get(f"/api/sessions/{session}/state")).json()["messages"]
    # The UI replays everything (the summary's model call hidden, with its cost); the
    # model sees the summary and the recent part only.
    assert [m["id"] for m in after[: len(before)]] == [m["id"] for m in before]
    summary, *added = after[len(before) :]
    assert summary["id"] == compaction.id and summary["message"]["display"] is False
    assert summary["turn_cost"]["model"] == compaction.model
    assert [m["role"] for m in added] == ["user", "assistant"]
    sent = stack.model.requests_for(session)[-1].body
    first = sent_texts(sent)[0]
    assert first.startswith("The conversation before this point was compacted")
    assert "Read parts 0 to 2" in first
    assert "part0.txt" not in " ".join(sent_texts(sent)[1:])  # the old calls are gone
    assert_valid_pairing(await stack.client.tree.path(session))


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                *reads(6),
                {"reply": [{"text": "all read"}]},
                {**SUMMARY, "wait_for": "summary"},
                TURN_START,
            ]
        }
    }
)
@BOTH_PROTOCOLS
async def test_auto_compaction_inside_a_run_keeps_a_steer_queued_during_it(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    write_parts(session.workspace)
    options = stack.client.runs.default_options().model_copy(
        update={
            "compaction": CompactionSettings(
                context_window=5000, reserve_tokens=0, keep_recent_tokens=1500
            )
        }
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "read every part", options=options)

        async def compacting() -> bool:
            return await stack.client.sessions.phase(session.id) == "compaction"

        await eventually(compacting, timeout=30)
        await stack.client.inputs.steer(session.id, "and count the characters")
        stack.model.release("summary")
        result = await run.result()
    assert result.status == "completed"
    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    started = [e.payload for e in events if e.type == "compaction_start"]
    assert started and started[0]["reason"] == "auto"
    path = await stack.client.tree.path(session.id)
    assert any(isinstance(e, CompactionEntry) for e in path)
    # The steer reached the first model call after the compaction.
    requests = [r.body for r in stack.model.requests_for(session.id)]
    summary_at = next(i for i, body in enumerate(requests) if "You are compacting" in str(body))
    after = next(b for b in requests[summary_at:] if wire.offered_tools(b))  # a turn's
    assert wire.texts(after)[0].startswith("The conversation before this point was compacted")
    assert "and count the characters" in wire.texts(after)
    assert_valid_pairing(path)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                *reads(3),
                {"error": {"status": 400, "message": "prompt is too long: 250000 tokens > 200000"}},
                SUMMARY,
                TURN_START,
                {"reply": [{"text": "fits now"}]},
            ]
        }
    }
)
async def test_a_context_overflow_compacts_and_retries_the_turn(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    write_parts(session.workspace)
    options = stack.client.runs.default_options().model_copy(
        update={"compaction": CompactionSettings(keep_recent_tokens=500)}
    )
    async with stack.worker():
        result = await (
            await stack.client.runs.prompt(session.id, "read", options=options)
        ).result()
    assert result.status == "completed" and result.final_text == "fits now"
    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    assert [e.payload["reason"] for e in events if e.type == "compaction_start"] == ["overflow"]


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "first answer"}]},
                {"reply": [{"text": "second answer"}]},
                {"match": "left the following branch", "reply": [{"text": "Tried approach B."}]},
                {"reply": [{"text": "third answer"}]},
            ]
        }
    }
)
async def test_navigation_branch_summary_fork_and_labels(stack: Stack) -> None:
    session = await stack.client.sessions.create(name="original")
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "approach A")).result()
        await (await stack.client.runs.prompt(session.id, "approach B")).result()
        path = await stack.client.tree.path(session.id)
        second_prompt = path[2]
        assert isinstance(second_prompt, MessageEntry)
        moved = await stack.client.tree.navigate(session.id, second_prompt.id, summarize=True)
        # A user message: the leaf moves to its parent and its text comes back to edit.
        assert moved.edit_text == "approach B"
        summary = (await stack.client.tree.path(session.id))[-1]
        assert isinstance(summary, BranchSummaryEntry) and "Tried approach B" in summary.summary
        await (await stack.client.runs.prompt(session.id, "approach C")).result()
        await stack.client.tree.label(session.id, path[1].id, "good start")
        await stack.client.sessions.rename(session.id, "renamed")
        with pytest.raises(SessionBusy):
            blocked = await stack.client.runs.prompt(session.id, "x")
            await stack.client.tree.compact(session.id)
        await blocked.result()
    roles = transcript_roles(await stack.client.tree.path(session.id))
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    texts = [
        text_of(e.message.content)
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]
    assert texts == ["approach A", "approach C", "x"]
    entries = await stack.client.tree.entries(session.id)
    assert any(isinstance(e, LeafEntry) and e.parent_id == path[-1].id for e in entries)
    assert await stack.client.tree.labels(session.id) == {path[1].id: "good start"}
    assert (await stack.client.sessions.get(session.id)).name == "renamed"
    # The third request carried the branch summary.
    third = stack.model.requests_for(session.id)[3].body
    assert any("Tried approach B" in t for t in sent_texts(third))

    fork = await stack.client.sessions.fork(session.id, path[1].id, name="fork")
    forked = await stack.client.tree.path(fork.id)
    assert transcript_roles(forked) == ["user", "assistant"]
    assert {e.id for e in forked}.isdisjoint({e.id for e in entries})
    assert fork.parent_session_id == session.id and fork.forked_from_entry_id == path[1].id
    assert [d.role for d in await stack.client.display.messages(fork.id)] == ["user", "assistant"]
