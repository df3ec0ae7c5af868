"""Compaction and branch summaries are model calls: their tokens and cost count in the
session's cost (`status`, `show`, `history`, the API's `/state`), in the tokens and cost
of the run that compacted, and toward run and session budgets (never in its turns)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support import BOTH_STORES, ApiServer, Stack, assert_valid_pairing

from duragent.activities.prices import bundled_prices
from duragent.domain.budgets import BUDGET_NOTE, Budget
from duragent.domain.compaction import CompactionSettings
from duragent.domain.cost import cost_text, usage_cost
from duragent.domain.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)
from duragent.domain.messages import AssistantMessage, Usage, text_of

BIG = "0123456789 " * 400  # about 4.4 KB, some 1100 tokens
SUMMARY_USAGE = {"input_tokens": 300_000, "output_tokens": 2_000}
SUMMARY = {
    "match": "You are compacting",
    "reply": [{"text": "## Goal\nRead the parts.\n## Progress\nRead some parts."}],
    "usage": SUMMARY_USAGE,
    "repeat": True,
}
TURN_START = {
    "match": "beginning of a turn",
    "reply": [{"text": "The user asked to read the parts."}],
    "usage": {"input_tokens": 5_000, "output_tokens": 100},
    "repeat": True,
}
BRANCH = {
    "match": "left the following branch",
    "reply": [{"text": "Tried approach B."}],
    "usage": SUMMARY_USAGE,
}


def reads(n: int) -> list[dict[str, Any]]:
    return [
        {"reply": [{"tool_use": {"name": "read", "input": {"path": f"part{i}.txt"}}}]}
        for i in range(n)
    ]


READS = {
    "conversations": {"*": [*reads(6), {"reply": [{"text": "all read"}]}, SUMMARY, TURN_START]}
}


def write_parts(workspace: str, n: int = 6) -> None:
    for i in range(n):
        (Path(workspace) / f"part{i}.txt").write_text(BIG)


def compacting_options(stack: Stack) -> Any:
    return stack.client.runs.default_options().model_copy(
        update={
            "compaction": CompactionSettings(
                context_window=5000, reserve_tokens=0, keep_recent_tokens=1500
            )
        }
    )


def assistant_usage(entries: list[SessionEntry]) -> Usage:
    total = Usage()
    for entry in entries:
        if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            total = total.plus(entry.message.usage)
    return total


def summaries_usage(stack: Stack, session_id: str) -> Usage:
    """What the summaries used, as the model reported it for each summary request."""
    summaries = Usage()
    for request in stack.model.requests_for(session_id):
        sent = str(request.body["messages"][-1]["content"])
        if "You are compacting" in sent:
            summaries = summaries.plus(Usage(**SUMMARY_USAGE))
        elif "beginning of a turn" in sent:
            summaries = summaries.plus(Usage(input_tokens=5_000, output_tokens=100))
    return summaries


@BOTH_STORES
@pytest.mark.script(READS)
async def test_a_runs_compaction_counts_in_its_cost_and_tokens(
    stack: Stack, api: ApiServer
) -> None:
    price = bundled_prices().price_of(stack.settings.model)
    assert price is not None
    async with api.client() as http:
        session_id = (await http.post("/api/sessions", json={})).json()["session"]["id"]
        write_parts((await stack.client.sessions.get(session_id)).workspace)
        async with stack.worker():
            run = await stack.client.runs.prompt(
                session_id, "read every part", options=compacting_options(stack)
            )
            result = await asyncio.wait_for(run.result(), timeout=120)
        assert result.status == "completed"
        state = (await http.get(f"/api/sessions/{session_id}/state")).json()
    summaries = summaries_usage(stack, session_id)
    assert summaries.input_tokens >= 300_000
    entries = await stack.client.tree.entries(session_id)
    turns = assistant_usage(entries)
    everything = turns.plus(summaries)
    total_usd = usage_cost(everything, price)
    assert total_usd > usage_cost(turns, price) * 2  # the summaries are most of it

    # The run's tokens include the summaries'; its turns are the loop's model calls only.
    assert result.usage == everything
    run_state = await stack.client.runs.get(result.run_id)
    assert run_state is not None and run_state.usage == everything
    assert result.turns == sum(
        isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage) for e in entries
    )
    # The cost of the run and the session, as the API and the client read it.
    assert state["run"]["cost"]["cost_usd"] == pytest.approx(total_usd)
    assert state["session_cost"]["cost_usd"] == pytest.approx(total_usd)
    assert state["session_cost"]["usage"] == everything.model_dump()
    assert (await stack.client.sessions.costs(session_id)).session.cost_usd == pytest.approx(
        total_usd
    )
    # Each compaction recorded its summary's model and what it used.
    compactions = [e for e in entries if isinstance(e, CompactionEntry)]
    assert compactions
    assert all(c.model == stack.settings.model for c in compactions)
    recorded = Usage()
    for compaction in compactions:
        recorded = recorded.plus(compaction.usage or Usage())
    assert recorded == summaries
    # Each summary's message is hidden, priced like a turn.
    shown_summaries = [m for m in state["messages"] if m["role"] == "custom"]
    assert [m["id"] for m in shown_summaries] == [c.id for c in compactions]
    for message, compaction in zip(shown_summaries, compactions, strict=True):
        assert message["message"]["display"] is False
        assert compaction.usage is not None
        expected = usage_cost(compaction.usage, price)
        assert message["turn_cost"]["cost_usd"] == pytest.approx(expected)

    status = await stack.cli_ok("status", session_id)
    assert f"session cost {cost_text(total_usd)}" in status
    assert f"run {result.run_id} cost {cost_text(total_usd)}" in status
    costs = [cost_text(usage_cost(c.usage or Usage(), price)) for c in compactions]
    shown = await stack.cli_ok("show", session_id)
    lines = [line for line in shown.splitlines() if line.startswith("· compaction")]
    assert len(lines) == len(compactions)
    for line, compaction, cost in zip(lines, compactions, costs, strict=True):
        assert f"{(compaction.usage or Usage()).input_tokens:,} in" in line and cost in line
    history = await stack.cli_ok("history", session_id)
    lines = [line for line in history.splitlines() if "compaction summary" in line]
    assert len(lines) == len(compactions)
    assert all(cost in line for line, cost in zip(lines, costs, strict=True))
    [ended] = [line for line in history.splitlines() if "run ended" in line and "turn(s)" in line]
    assert f"{cost_text(total_usd)} in all" in ended


@pytest.mark.script(READS)
async def test_a_runs_token_budget_is_reached_by_its_compaction(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    write_parts(session.workspace)
    async with stack.worker():
        run = await stack.client.runs.prompt(
            session.id,
            "read every part",
            options=compacting_options(stack),
            budget=Budget(max_tokens=200_000),
        )
        result = await asyncio.wait_for(run.result(), timeout=120)
    assert result.status == "completed"
    assert result.error is not None and "the run's token limit (200,000 tokens)" in result.error
    path = await stack.client.tree.path(session.id)
    assert_valid_pairing(path)
    note = path[-1]
    assert isinstance(note, CustomMessageEntry) and note.custom_type == BUDGET_NOTE
    # It stopped at the first check after the compaction: no read after it.
    assert isinstance(path[-2], CompactionEntry)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "first answer"}]},
                {"reply": [{"text": "second answer"}]},
                BRANCH,
                {"reply": [{"text": "never said"}]},
            ]
        }
    }
)
async def test_a_branch_summary_counts_toward_the_session_budget(stack: Stack) -> None:
    price = bundled_prices().price_of(stack.settings.model)
    assert price is not None
    session = await stack.client.sessions.create()
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "approach A")).result()
        await (await stack.client.runs.prompt(session.id, "approach B")).result()
        second_prompt = (await stack.client.tree.path(session.id))[2]
        await stack.client.tree.navigate(session.id, second_prompt.id, summarize=True)
        runs_tokens = sum(r.usage.total_tokens for r in await stack.client.runs.list(session.id))
        assert runs_tokens < 100_000
        turns = assistant_usage(await stack.client.tree.entries(session.id))
        costs = await stack.client.sessions.costs(session.id)
        expected = usage_cost(turns.plus(Usage(**SUMMARY_USAGE)), price)
        assert costs.session.cost_usd == pytest.approx(expected)
        # The runs alone are far below the limit; with the summary the session is past it.
        await stack.client.budgets.set(session.id, Budget(max_tokens=runs_tokens + 100_000))
        result = await (await stack.client.runs.prompt(session.id, "approach C")).result()
    assert result.error is not None and "the session's token limit" in result.error
    assert result.turns == 0
    note = (await stack.client.tree.path(session.id))[-1]
    assert isinstance(note, CustomMessageEntry) and text_of(note.content) == result.error
    entries = await stack.client.tree.entries(session.id)
    [summary] = [e for e in entries if isinstance(e, BranchSummaryEntry)]
    assert summary.model == stack.settings.model and summary.usage == Usage(**SUMMARY_USAGE)


@pytest.mark.script(
    {"conversations": {"*": [*reads(3), {"reply": [{"text": "read them"}]}, SUMMARY, TURN_START]}}
)
async def test_a_manual_compaction_says_and_counts_what_its_summary_cost(stack: Stack) -> None:
    price = bundled_prices().price_of(stack.settings.model)
    assert price is not None
    session = await stack.client.sessions.create()
    write_parts(session.workspace)
    async with stack.worker():
        await (await stack.client.runs.prompt(session.id, "read the parts")).result()
        before = (await stack.client.sessions.costs(session.id)).session.cost_usd
        assert before is not None
        out = await stack.cli_ok("compact", session.id, "--keep", "500")
    summary = summaries_usage(stack, session.id)
    summary_usd = usage_cost(summary, price)
    assert f", the summary {cost_text(summary_usd)}): " in out
    status = await stack.cli_ok("status", session.id)
    assert f"session cost {cost_text(before + summary_usd)}" in status
    [compaction] = [
        e for e in await stack.client.tree.entries(session.id) if isinstance(e, CompactionEntry)
    ]
    assert compaction.usage == summary and out.strip().endswith(compaction.id)
