"""Budgets: each limit reached mid-run stops the run at a save point with a valid
transcript and the message in it; `ask` waits for a raise, which lets the run go on; a
sub-agent's spending counts toward its parent's; the API keeps to the session's owner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rich.console import Console
from support import ApiServer, Stack, assert_valid_pairing, event_seen, eventually

from duragent.client.budgets import BudgetRefused
from duragent.client.errors import SessionIdle
from duragent.client.render import EventPrinter
from duragent.domain.budgets import BUDGET_NOTE, Budget
from duragent.domain.entries import CustomMessageEntry, MessageEntry
from duragent.domain.messages import AssistantMessage, text_of
from duragent.domain.runs import RunResult
from duragent.domain.subagents import DELEGATE_TOOL
from duragent.store import events as stored_events


def bash(command: str) -> dict[str, Any]:
    return {"tool_use": {"name": "bash", "input": {"command": command}}}


def calls(count: int, **step: Any) -> dict[str, Any]:
    """A script: `count` replies that each call a tool, then a final answer."""
    replies = [{"reply": [bash(f"echo {n}")], **step} for n in range(count)]
    return {"conversations": {"*": [*replies, {"reply": [{"text": "All done."}]}]}}


def events_of(stack: Stack, session_id: str, kind: str) -> list[dict[str, Any]]:
    with stack.db.transaction() as db:
        found = stored_events.read_events(db, session_id, after=0, limit=10_000)
    return [e.payload for e in found if e.type == kind]


def assert_stopped_by_budget(stack: Stack, session_id: str, result: RunResult, what: str) -> None:
    """Completed, stopped at a save point: every call answered, the note last, the
    message in the run's result, its stored state and its events."""
    assert result.status == "completed"
    assert result.error is not None and result.error.startswith("Budget reached: ")
    assert what in result.error
    path = stack.client.sync.tree.path(session_id)
    assert_valid_pairing(path)
    note = path[-1]
    assert isinstance(note, CustomMessageEntry) and note.custom_type == BUDGET_NOTE
    assert text_of(note.content) == result.error
    state = stack.client.sync.runs.get(result.run_id)
    assert state is not None and state.status == "completed" and state.error == result.error
    [reached] = events_of(stack, session_id, "budget_reached")
    assert reached["stopped"] is True and reached["message"] == result.error
    [end] = [e for e in events_of(stack, session_id, "agent_end") if e["run_id"] == result.run_id]
    assert end["error"] == result.error


def model_calls(stack: Stack, session_id: str) -> int:
    return len(stack.model.requests_for(session_id))


@pytest.mark.script(calls(5))
async def test_turn_limit_stops_at_a_save_point(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go", budget=Budget(max_turns=2))
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert_stopped_by_budget(stack, session.id, result, "the run's turn limit (2 turns)")
    assert result.turns == 2 and model_calls(stack, session.id) == 2
    assert "2 turns spent" in (result.error or "")


@pytest.mark.script(calls(5, usage={"input_tokens": 600, "output_tokens": 10}))
async def test_token_limit_stops_at_a_save_point(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go", budget={"max_tokens": 1000})
        result = await asyncio.wait_for(run.result(), timeout=60)
    # 610 tokens after one turn, 1,220 after two: the check before the third stops it.
    assert_stopped_by_budget(
        stack, session.id, result, "token limit (1,000 tokens) is reached: 1,220 tokens spent"
    )
    assert result.turns == 2 and result.usage.total_tokens == 1220


@pytest.mark.script(calls(5, usage={"input_tokens": 100_000, "output_tokens": 0}))
async def test_cost_limit_stops_at_a_save_point(stack: Stack) -> None:
    # claude-sonnet-5-5: $2.00 per million input tokens, so $0.20 a turn.
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go", budget=Budget(max_cost_usd=0.3))
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert_stopped_by_budget(
        stack, session.id, result, "the run's cost limit ($0.3000) is reached: $0.4000 spent"
    )
    assert result.turns == 2 and result.cost_usd == pytest.approx(0.4)
    assert (await stack.client.sessions.costs(session.id)).session.cost_usd == pytest.approx(0.4)


@pytest.mark.script(calls(3))
async def test_cost_limit_without_a_price_is_refused(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.config.set_model(session.id, "claude-unpriced-1")
        with pytest.raises(BudgetRefused, match="needs a price for model 'claude-unpriced-1'"):
            await stack.client.runs.prompt(session.id, "go", budget=Budget(max_cost_usd=1))
        with pytest.raises(BudgetRefused, match="needs a price for model 'claude-unpriced-1'"):
            await stack.client.budgets.set(session.id, Budget(max_cost_usd=1))
    assert await stack.client.runs.list(session.id) == []


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [bash("echo slow")], "delay_ms": 1500},
                {"reply": [bash("echo 2")]},
                {"reply": [{"text": "All done."}]},
            ]
        }
    }
)
async def test_wall_time_limit_stops_at_a_save_point(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "go", budget=Budget(max_wall_s=1))
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert_stopped_by_budget(stack, session.id, result, "the run's wall-time limit (1.0 s)")
    assert result.turns == 1 and model_calls(stack, session.id) == 1


@pytest.mark.script(calls(2))
async def test_ask_waits_and_a_raise_lets_it_go_on(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        budget = Budget(max_turns=1, on_exceed="ask")
        run = await stack.client.runs.prompt(session.id, "go", budget=budget)
        await eventually(lambda: event_seen(stack, session.id, "budget_reached"))
        await eventually(lambda: _phase_is(stack, session.id, "awaiting_budget"), timeout=30)
        view = await stack.client.budgets.get(session.id)
        [waiting] = view.waiting
        assert (waiting.scope, waiting.limit, waiting.spent) == ("run", "turns", 1)
        # The turn before the wait is saved: its call answered, nothing else.
        assert_valid_pairing(await stack.client.tree.path(session.id))
        with pytest.raises(BudgetRefused, match="still reached"):
            await stack.client.budgets.raise_limits(session.id, Budget(max_turns=1))
        with pytest.raises(BudgetRefused, match="must not lower"):
            await stack.client.budgets.raise_limits(session.id, Budget(max_turns=3, max_tokens=5))
        raised = await stack.client.budgets.raise_limits(
            session.id, Budget(max_turns=2, on_exceed="ask"), by="alice"
        )
        assert raised.run_budget == Budget(max_turns=2, on_exceed="ask")
        assert raised.waiting == []  # what the raise answers says the run waits no more
        # Two turns spent, the limit is two: it waits again before the third.
        await eventually(lambda: len(events_of(stack, session.id, "budget_reached")) == 2)
        await stack.client.budgets.raise_limits(session.id, Budget(max_turns=5))
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed" and result.error is None
    assert result.final_text == "All done."
    raises = events_of(stack, session.id, "budget_raised")
    assert [r["budget"].get("max_turns") for r in raises] == [2, 5]
    assert raises[0]["by"] == "alice"
    phases = [e["phase"] for e in events_of(stack, session.id, "phase_changed")]
    assert phases[:2] == ["awaiting_budget", "turn"]
    assert_valid_pairing(await stack.client.tree.path(session.id))


async def _phase_is(stack: Stack, session_id: str, phase: str) -> bool:
    found: str = (await stack.client.sessions.status(session_id)).phase
    return found == phase


@pytest.mark.script(calls(3))
async def test_abort_while_waiting_for_a_raise(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        budget = Budget(max_turns=1, on_exceed="ask")
        await stack.client.runs.prompt(session.id, "go", budget=budget)
        await eventually(lambda: _phase_is(stack, session.id, "awaiting_budget"), timeout=30)
        result = await stack.client.runs.abort(session.id)
    assert result.status == "aborted" and result.turns == 1
    assert_valid_pairing(await stack.client.tree.path(session.id))
    with pytest.raises(SessionIdle):
        await stack.client.budgets.raise_limits(session.id, Budget(max_turns=9))


@pytest.mark.script(calls(8))
async def test_session_budget_counts_every_run(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    async with stack.worker():
        await stack.client.budgets.set(session.id, Budget(max_turns=3))
        first = await stack.client.runs.prompt(session.id, "one", max_turns=2)
        assert (await asyncio.wait_for(first.result(), timeout=60)).error is None
        second = await stack.client.runs.prompt(session.id, "two")
        result = await asyncio.wait_for(second.result(), timeout=60)
    assert_stopped_by_budget(
        stack, session.id, result, "the session's turn limit (3 turns) is reached: 3 turns"
    )
    assert result.turns == 1
    view = await stack.client.budgets.get(session.id)
    assert view.session_budget == Budget(max_turns=3)
    assert view.session_spent is not None and view.session_spent.turns == 3
    # Used up: the next run stops before its first model call, its prompt kept.
    calls_before = model_calls(stack, session.id)
    async with stack.worker():
        third = await (await stack.client.runs.prompt(session.id, "three")).result()
    assert third.status == "completed" and third.turns == 0
    assert third.error is not None and "3 turns spent" in third.error
    assert model_calls(stack, session.id) == calls_before
    path = await stack.client.tree.path(session.id)
    assert isinstance(path[-1], CustomMessageEntry) and path[-1].custom_type == BUDGET_NOTE
    assert isinstance(path[-2], MessageEntry) and text_of(path[-2].message.content) == "three"


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                # The sub-agent's own turns: tool calls, then its answer; 5,000 tokens each.
                {
                    "match": "^Child",
                    "usage": {"input_tokens": 5000, "output_tokens": 0},
                    "reply": [bash("echo child")],
                },
                {"usage": {"input_tokens": 5000, "output_tokens": 0}, "reply": [bash("echo 2")]},
                {"usage": {"input_tokens": 5000, "output_tokens": 0}, "reply": [{"text": "ok"}]},
            ]
        }
    }
)
async def test_a_sub_agents_spending_counts_toward_the_parent(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    delegate = {"name": DELEGATE_TOOL, "input": {"prompt": "Child: work", "name": "worker"}}
    parent_steps: list[dict[str, Any]] = [
        {"usage": {"input_tokens": 100, "output_tokens": 0}, "reply": [{"tool_use": delegate}]},
        {"reply": [{"text": "Parent done."}]},
    ]
    stack.model.add_steps(session.id, parent_steps, replace=True)
    async with stack.worker():
        run = await stack.client.runs.prompt(session.id, "delegate", budget=Budget(max_tokens=8000))
        result = await asyncio.wait_for(run.result(), timeout=60)
    # The parent's 100 tokens and the child's 10,000: it had 7,900 left, so its own check
    # stopped it after its second turn, and the parent's stops the parent after the call.
    assert_stopped_by_budget(stack, session.id, result, "10,100 tokens spent")
    assert result.turns == 1 and result.usage.total_tokens == 10_100
    # Priced at $2/M input: the child's $0.02 adds to the parent's $0.0002.
    assert result.cost_usd == pytest.approx(0.0202)
    [child] = await stack.client.sessions.children(session.id)
    child_runs = await stack.client.runs.list(child.id)
    assert child_runs[0].error is not None and "7,900 tokens" in child_runs[0].error
    answers = [
        e.message
        for e in await stack.client.tree.path(session.id)
        if isinstance(e, MessageEntry)
        and not isinstance(e.message, AssistantMessage)
        and getattr(e.message, "tool_name", None) == DELEGATE_TOOL
    ]
    assert "Budget reached" in text_of(answers[0].content)


@pytest.mark.script(calls(2))
async def test_budget_api_keeps_to_the_owner(stack: Stack, api: ApiServer) -> None:
    async with stack.worker(), api.client() as alice, api.client(ApiServer.OTHER_TOKEN) as bob:
        made = await alice.post("/api/sessions", json={})
        session_id = made.json()["session"]["id"]
        budget_url = f"/api/sessions/{session_id}/budget"
        put = await alice.put(budget_url, json={"budget": {"max_tokens": 500, "on_exceed": "ask"}})
        assert put.status_code == 200, put.text
        assert put.json()["session_budget"]["max_tokens"] == 500
        got = await alice.get(budget_url)
        assert got.json()["session_spent"]["tokens"] == 0
        bad = await alice.put(budget_url, json={"budget": {"max_tokens": 0}})
        assert bad.status_code == 422 and "max_tokens" in bad.text
        for method, path, body in (
            ("GET", "", None),
            ("PUT", "", {"budget": {"max_turns": 9}}),
            ("POST", "/raise", {"budget": {"max_turns": 9}}),
        ):
            other = await bob.request(method, budget_url + path, json=body)
            assert other.status_code == 404, (method, path, other.text)
        idle = await alice.post(budget_url + "/raise", json={"budget": {"max_tokens": 900}})
        assert idle.status_code == 409 and "no run in progress" in idle.text
    session = await stack.client.sessions.get(session_id)
    assert session.config.budget == Budget(max_tokens=500, on_exceed="ask")


@pytest.mark.script(calls(2))
async def test_the_command_line_shows_and_raises_a_waiting_budget(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    code, _, err = await stack.cli("budget", session.id, "--turns", "0")
    assert code == 2 and "--turns" in err
    async with stack.worker():
        code, out, err = await stack.cli("budget", session.id, "--turns", "1", "--ask")
        assert code == 0, err
        assert "session budget: 1 turn; when reached: ask to raise" in out
        run = await stack.client.runs.prompt(session.id, "go")
        await eventually(lambda: _phase_is(stack, session.id, "awaiting_budget"), timeout=30)
        code, out, err = await stack.cli("status", session.id)
        assert code == 0, err
        assert "waiting: the session's turn limit (1 turn) is reached: 1 turn spent" in out
        code, out, err = await stack.cli("raise-budget", session.id, "--turns", "1")
        assert code == 2 and "still reached" in err
        code, out, err = await stack.cli("raise-budget", session.id, "--turns", "5")
        assert code == 0, err
        result = await asyncio.wait_for(run.result(), timeout=60)
    assert result.status == "completed" and result.final_text == "All done."
    # What `duragent run` printed of it: the wait, the command to raise, the raise.
    console = Console(record=True, width=200)
    printer = EventPrinter(console, session.id)
    async for event in stack.client.events.stream(session.id, follow=False):
        printer.show(event)
    printer.close()
    shown = console.export_text()
    assert "? Budget reached: the session's turn limit (1 turn) is reached" in shown
    assert f"raise: duragent raise-budget {session.id} --turns NEW_LIMIT" in shown
    assert "the session's budget was raised" in shown
    # The raise is saved as the session's budget, like any setter's.
    stored = (await stack.client.sessions.get(session.id)).config.budget
    assert stored == Budget(max_turns=5, on_exceed="ask")


@pytest.mark.script(calls(6, usage={"input_tokens": 100_000, "output_tokens": 0}))
async def test_a_budget_is_carried_across_continue_as_new(stack: Stack) -> None:
    session = await stack.client.sessions.create()
    options = stack.client.runs.default_options().model_copy(
        update={"continue_as_new_after_turns": 1}
    )
    async with stack.worker():
        run = await stack.client.runs.prompt(
            session.id, "go", options=options, budget=Budget(max_cost_usd=0.5)
        )
        result = await asyncio.wait_for(run.result(), timeout=90)
    # $0.20 a turn, one turn per execution: counted across them, it stops after three.
    assert_stopped_by_budget(stack, session.id, result, "$0.6000 spent")
    assert result.turns == 3 and len(events_of(stack, session.id, "continued_as_new")) >= 2


async def test_the_command_line_refuses_a_limit_of_zero(stack: Stack) -> None:
    """0 is no way to say "no limit": refused on one line naming the option, as the API
    refuses it, saying how to have no such limit; nothing is stored or started."""
    session = await stack.client.sessions.create()
    refused = [
        (["budget", session.id, "--cost", "0"], "--cost must be above 0 (got 0)"),
        (["budget", session.id, "--wall", "0"], "--wall must be above 0 (got 0)"),
        (["budget", session.id, "--turns", "0"], "--turns must be 1 or more (got 0)"),
        (["run", "--session", session.id, "--max-cost", "0", "go"], "--max-cost must be above 0"),
        (["run", "--session", session.id, "--max-wall", "0", "go"], "--max-wall must be above 0"),
        (["raise-budget", session.id, "--cost", "0"], "--cost must be above 0 (got 0)"),
    ]
    async with stack.worker():  # a command that took 0 would go ahead, and not hang
        for args, message in refused:
            code, _, err = await stack.cli(*args)
            lines = [line for line in err.splitlines() if line.strip()]
            assert code == 2 and len(lines) == 1, err
            assert lines[0].startswith(f"error: {message}"), err
            assert "for no" in lines[0] or "a raise gives a higher limit" in lines[0]
        code, _, err = await stack.cli("budget", session.id, "--cost", "0")
        assert "leave --cost out" in err
        assert (await stack.client.sessions.get(session.id)).config.budget is None
        assert await stack.client.runs.list(session.id) == []
        # Leaving the option out is how: the budget is the limits given.
        code, out, err = await stack.cli("budget", session.id, "--turns", "3")
    assert code == 0 and "session budget: 3 turns; when reached: stop" in out, err
