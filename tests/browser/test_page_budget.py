"""Budgets on the page: a run that waits for a raise shows the budget card above the
composer (what was reached, the limits to raise, the server's refusal), which goes when the
budget is raised here or elsewhere, or the run ends; a reload shows the same. The run
header shows the budget's use, and a budget stop's note reads as one in the conversation.
The session's budget is set, changed and removed in its editor (the header's "Budget", or a
stop note's "Change budget"), which shows what was spent next to each limit."""

from __future__ import annotations

from typing import Any

import pytest
from approval_support import bash_call, calls_then_text
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, event_seen, eventually, let_go, run_finished

from browser.pages import loaded, new_session, open_session, screenshot, send, signed_in
from duragent.activities.prices import bundled_prices
from duragent.domain.budgets import Budget
from duragent.domain.cost import cost_text, usage_cost

pytestmark = pytest.mark.browser

SCRIPT = calls_then_text([bash_call("echo one", "call_one")], "All done.")
CARD = "#budget .budget-card"
TURNS = f'{CARD} .budget-input[data-scope="session"][data-limit="max_turns"]'
REACHED = "the session's turn limit (1 turn) is reached: 1 turn spent"
SAID = f"T{REACHED[1:]}. The run waits for the budget to be raised."
"""The card's words: the server's message, without the "Budget reached: " its head says."""
EDITOR = "#budget-editor .budget-editor"


def limit_box(limit: str) -> str:
    """The editor's box of one limit (`max_turns`, `max_tokens`, ...)."""
    return f'{EDITOR} .budget-input[data-limit="{limit}"]'


async def stored_budget(http: Any, session_id: str) -> dict[str, Any] | None:
    """The session's budget as GET /budget answers it (None: no budget)."""
    got = await http.get(f"/api/sessions/{session_id}/budget")
    assert got.status_code == 200, got.text
    budget: dict[str, Any] | None = got.json()["session_budget"]
    return budget


async def put_budget(http: Any, session_id: str, budget: dict[str, Any]) -> None:
    """Set the session's budget through the API, as another client would."""
    put = await http.put(f"/api/sessions/{session_id}/budget", json={"budget": budget})
    assert put.status_code == 200, put.text


async def waiting_page(stack: Stack, api: ApiServer, http: Any, context: Any) -> tuple[str, Any]:
    """A session whose budget of one turn asks for a raise, its run waiting, open in the
    page."""
    session_id = await new_session(http)
    await put_budget(http, session_id, {"max_turns": 1, "on_exceed": "ask"})
    page = await signed_in(context, api)
    await open_session(page, session_id)
    await send(page, "go")
    await expect(page.locator(CARD)).to_be_visible()
    return session_id, page


@pytest.mark.script(SCRIPT)
async def test_the_card_says_what_was_reached_and_a_raise_lets_the_run_finish(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        card = page.locator(CARD)
        await expect(card.locator(".budget-message")).to_have_text(SAID)
        await expect(page.locator(".run-header .phase")).to_have_text("waiting for a budget raise")
        await expect(page.locator(".run-header .budget")).to_have_text("budget: 1 of 1 turn")
        await expect(page.locator(TURNS)).to_have_value("1")
        await screenshot(page, "budget-card")

        # The same limit again is no raise: the server's refusal shows, the card stays.
        await card.locator("button.budget-raise").click()
        await expect(card.locator(".budget-error")).to_have_text(
            "a raise must raise the limits reached: the session's turn limit of 1 turn "
            "is still reached (1 turn spent)"
        )
        await expect(card).to_be_visible()
        await screenshot(page, "budget-card-refused")

        await page.locator(TURNS).fill("3")
        await card.locator("button.budget-raise").click()
        await expect(card).to_have_count(0)
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done.")
        await eventually(lambda: run_finished(stack, session_id))
        [run] = await stack.client.runs.list(session_id)
        assert run.status == "completed" and run.error is None
        assert (await stack.client.sessions.get(session_id)).config.budget == Budget(
            max_turns=3, on_exceed="ask"
        )
        await expect(page.locator(".run-header .budget")).to_have_text("budget: 2 of 3 turns")
        await expect(page.locator(".run-header .phase")).to_have_text("idle")
        await expect(page.locator("#budget")).to_be_hidden()


@pytest.mark.script(SCRIPT)
async def test_a_reload_while_waiting_shows_the_card_and_another_clients_raise_clears_it(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        # What the card says after a reload, when the event is no longer among those loaded.
        state = (await http.get(f"/api/sessions/{session_id}/state")).json()
        assert (
            state["budget"]["waiting_message"]
            == f"Budget reached: {REACHED}. The run waits for the budget to be raised."
        )
        await page.reload()
        await loaded(page, session_id)
        card = page.locator(CARD)
        await expect(card.locator(".budget-message")).to_have_text(SAID)
        await expect(page.locator(TURNS)).to_have_value("1")
        await expect(page.locator(".run-header .phase")).to_have_text("waiting for a budget raise")
        await stack.client.budgets.raise_limits(session_id, Budget(max_turns=5, on_exceed="ask"))
        await expect(card).to_have_count(0)
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done.")
        await eventually(lambda: run_finished(stack, session_id))


@pytest.mark.script(SCRIPT)
async def test_stop_ends_a_run_that_waits_for_a_raise(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        await page.locator(".run-header button.stop").click()
        await expect(page.locator(CARD)).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
        [run] = await stack.client.runs.list(session_id)
        assert run.status == "aborted"
        await expect(page.locator(".run-header .phase")).to_have_text("idle")


@pytest.mark.script(SCRIPT)
async def test_a_budget_stop_leaves_a_note_and_the_header_shows_the_use(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id = await new_session(http)
        await put_budget(http, session_id, {"max_turns": 1, "max_cost_usd": 0.5})
        page = await signed_in(browser_context, api)
        await open_session(page, session_id)
        await send(page, "go")
        await eventually(lambda: run_finished(stack, session_id))
        await eventually(lambda: event_seen(stack, session_id, "budget_reached", stopped=True))
        note = page.locator(".msg.budget-note")
        await expect(note.locator(".who")).to_have_text("Budget reached")
        await expect(note).to_contain_text(
            "The session's turn limit (1 turn) is reached: 1 turn spent. The run stopped here"
        )
        [run] = await stack.client.runs.list(session_id)
        price = bundled_prices().price_of(stack.settings.model)
        assert price is not None
        spent = cost_text(usage_cost(run.usage, price))
        await expect(page.locator(".run-header .budget")).to_have_text(
            f"budget: 1 of 1 turn · {spent} of $0.5000"
        )
        await expect(page.locator(CARD)).to_have_count(0)
        await screenshot(page, "budget-stop-note")


@pytest.mark.script(calls_then_text([bash_call(UNTIL_GO, "call_wait")], "All done."))
async def test_a_runs_own_budget_shows_while_it_works_and_is_raised_from_its_card(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session_id)
        await stack.client.runs.prompt(
            session_id, "go", budget=Budget(max_turns=1, on_exceed="ask")
        )
        await eventually(lambda: event_seen(stack, session_id, "tool_execution_start"))
        # Mid-turn, before any limit is reached: the run's budget and what it spent.
        await expect(page.locator(".run-header .budget")).to_have_text("budget: 1 of 1 turn")
        let_go(stack, session_id)
        card = page.locator(CARD)
        await expect(card.locator(".budget-message")).to_have_text(
            "The run's turn limit (1 turn) is reached: 1 turn spent. "
            "The run waits for the budget to be raised."
        )
        turns = card.locator('.budget-input[data-scope="run"][data-limit="max_turns"]')
        await expect(turns).to_have_value("1")
        await turns.fill("2")
        await turns.press("Enter")
        await expect(card).to_have_count(0)
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done.")
        await eventually(lambda: run_finished(stack, session_id))
        [run] = await stack.client.runs.list(session_id)
        assert run.status == "completed" and run.error is None
        raised = [
            e.payload
            async for e in stack.client.events.stream(session_id, follow=False)
            if e.type == "budget_raised"
        ]
        assert [(r["scope"], r["budget"]["max_turns"]) for r in raised] == [("run", 2)]


@pytest.mark.script(SCRIPT)
async def test_a_budget_set_on_the_page_stops_a_run_and_its_notes_button_raises_it(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session_id)
        # An idle session without a budget: the header's Budget opens an empty editor.
        await page.locator(".run-header button.edit-budget").click()
        editor = page.locator(EDITOR)
        await expect(page.locator(limit_box("max_turns"))).to_have_value("")
        await expect(editor.locator("button.budget-remove")).to_be_disabled()
        await page.locator(limit_box("max_turns")).fill("1")
        await page.locator(limit_box("max_tokens")).fill("1000000")
        await editor.locator("button.budget-save").click()
        await expect(editor).to_have_count(0)
        assert (await stack.client.sessions.get(session_id)).config.budget == Budget(
            max_turns=1, max_tokens=1_000_000
        )
        assert await stored_budget(http, session_id) == {
            "max_turns": 1,
            "max_tokens": 1_000_000,
            "max_cost_usd": None,
            "max_wall_s": None,
            "on_exceed": "stop",
        }
        await expect(page.locator(".run-header .budget")).to_have_text(
            "budget: 0 of 1 turn · 0 of 1,000,000 tokens"
        )

        # The run stops at it; its note's button opens the editor at what was spent.
        await send(page, "go")
        await eventually(lambda: run_finished(stack, session_id))
        note = page.locator(".msg.budget-note")
        await expect(note).to_contain_text("The session's turn limit (1 turn) is reached")
        await note.locator("button.change-budget").click()
        await expect(page.locator(limit_box("max_turns"))).to_have_value("1")
        await expect(page.locator(limit_box("max_turns"))).to_be_focused()
        turns = editor.locator('.budget-limit[data-limit="max_turns"] .budget-spent')
        await expect(turns).to_have_text("1 turn spent")
        await expect(editor.locator('input[name="on_exceed"][value="stop"]')).to_be_checked()
        await screenshot(page, "budget-editor")

        await page.locator(limit_box("max_turns")).fill("3")
        await page.locator(limit_box("max_turns")).press("Enter")
        await expect(editor).to_have_count(0)
        assert (await stack.client.sessions.get(session_id)).config.budget == Budget(
            max_turns=3, max_tokens=1_000_000
        )
        await expect(page.locator(".run-header .budget")).to_contain_text("budget: 1 of 3 turns")

        # The next run goes on past the old limit of one turn.
        await send(page, "go on")
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done.")
        await eventually(lambda: run_finished(stack, session_id))
        latest = (await stack.client.runs.list(session_id))[0]
        assert latest.status == "completed" and latest.error is None
        await expect(page.locator(".run-header .budget")).to_contain_text("budget: 2 of 3 turns")
        assert await page.locator(".msg.budget-note").count() == 1


@pytest.mark.script(SCRIPT)
async def test_a_bad_limit_is_named_in_the_editor_and_nothing_is_stored(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id = await new_session(http)
        await put_budget(http, session_id, {"max_turns": 2, "on_exceed": "ask"})
        before = await stored_budget(http, session_id)
        page = await signed_in(browser_context, api)
        await open_session(page, session_id)
        puts: list[str] = []
        page.on("request", lambda r: puts.append(r.url) if r.method == "PUT" else None)
        await page.locator(".run-header button.edit-budget").click()
        editor = page.locator(EDITOR)
        error = editor.locator(".budget-error")
        await expect(page.locator(limit_box("max_turns"))).to_have_value("2")
        await expect(editor.locator('input[name="on_exceed"][value="ask"]')).to_be_checked()

        # Not a number: named on the page, nothing sent.
        await page.locator(limit_box("max_tokens")).fill("abc")
        await editor.locator("button.budget-save").click()
        await expect(error).to_have_text(
            'Tokens: "abc" is not a number (leave the box empty for no limit)'
        )
        await expect(page.locator(limit_box("max_tokens"))).to_have_value("abc")
        await expect(page.locator(limit_box("max_tokens"))).to_have_attribute(
            "aria-invalid", "true"
        )
        assert puts == []

        # A limit of 0: the server's refusal, said with the box's name; what was typed stays.
        await page.locator(limit_box("max_tokens")).fill("")
        await page.locator(limit_box("max_turns")).fill("0")
        await editor.locator("button.budget-save").click()
        await expect(error).to_have_text("Not saved: Turns should be greater than or equal to 1")
        await expect(page.locator(limit_box("max_turns"))).to_have_attribute("aria-invalid", "true")
        await expect(page.locator(limit_box("max_tokens"))).not_to_have_attribute(
            "aria-invalid", "true"
        )
        assert len(puts) == 1
        await expect(page.locator(limit_box("max_turns"))).to_have_value("0")
        await expect(editor.locator("button.budget-save")).to_be_enabled()
        await screenshot(page, "budget-editor-refused")

        # A cost limit for a model without a price: the server's reason.
        await stack.client.config.set_model(session_id, "claude-unpriced-1")
        await page.locator(limit_box("max_turns")).fill("2")
        await page.locator(limit_box("max_cost_usd")).fill("0.5")
        await editor.locator("button.budget-save").click()
        await expect(error).to_contain_text(
            "Not saved: a cost limit needs a price for model 'claude-unpriced-1'"
        )
        await expect(page.locator(limit_box("max_cost_usd"))).to_have_value("0.5")
        assert len(puts) == 2
        assert await stored_budget(http, session_id) == before
        assert (await stack.client.sessions.get(session_id)).config.budget == Budget(
            max_turns=2, on_exceed="ask"
        )


@pytest.mark.script(SCRIPT)
async def test_remove_budget_clears_the_sessions_budget(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id = await new_session(http)
        await put_budget(http, session_id, {"max_turns": 2})
        page = await signed_in(browser_context, api)
        await open_session(page, session_id)
        await expect(page.locator(".run-header .budget")).to_have_text("budget: 0 of 2 turns")
        await page.locator(".run-header button.edit-budget").click()
        editor = page.locator(EDITOR)
        await expect(page.locator(limit_box("max_turns"))).to_have_value("2")
        await editor.locator("button.budget-remove").click()
        await expect(editor).to_have_count(0)
        assert await stored_budget(http, session_id) is None
        assert not (await stack.client.budgets.get(session_id)).session_budget
        await expect(page.locator(".run-header .budget")).to_have_text("")
        # Opened again: no limits, nothing to remove.
        await page.locator(".run-header button.edit-budget").click()
        await expect(page.locator(limit_box("max_turns"))).to_have_value("")
        await expect(editor.locator("button.budget-remove")).to_be_disabled()
        await editor.locator("button.budget-close").click()
        await expect(editor).to_have_count(0)


@pytest.mark.script(SCRIPT)
async def test_a_budget_saved_in_the_editor_while_a_run_waits_lets_it_go_on(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        await page.locator(".run-header button.edit-budget").click()
        editor = page.locator(EDITOR)
        await expect(page.locator(limit_box("max_turns"))).to_have_value("1")
        await expect(editor.locator('input[name="on_exceed"][value="ask"]')).to_be_checked()
        await page.locator(limit_box("max_turns")).fill("3")
        await editor.locator("button.budget-save").click()
        await expect(editor).to_have_count(0)
        # A new session budget that leaves no limit reached: the run goes on, its card goes.
        await expect(page.locator(CARD)).to_have_count(0)
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done.")
        await eventually(lambda: run_finished(stack, session_id))
        [run] = await stack.client.runs.list(session_id)
        assert run.status == "completed" and run.error is None
        assert (await stack.client.sessions.get(session_id)).config.budget == Budget(
            max_turns=3, on_exceed="ask"
        )
