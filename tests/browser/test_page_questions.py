"""The question card: an `ask_user` call shows its question, a button per choice and an
input; the answer is the call's result, and the card goes when the question is answered,
here or from another client."""

from __future__ import annotations

from typing import Any

import pytest
from approval_support import result_text, tool_results_sent
from playwright.async_api import expect
from support import REPO, ApiServer, Stack, eventually, run_finished

from browser.pages import new_session, open_session, screenshot, send, signed_in
from duragent.offline_model.script import load_script

pytestmark = pytest.mark.browser

SCRIPT = load_script(REPO / "offline_model" / "scripts" / "ask_user.yaml")
CARD = '.tool[data-call-id="call_ask"] .question'


async def asking_page(stack: Stack, api: ApiServer, http: Any, context: Any) -> tuple[str, Any]:
    """A session whose `ask_user` call waits for an answer, open in the page."""
    session_id = await new_session(http)
    await stack.client.config.set_active_tools(session_id, ["ls", "ask_user"])
    page = await signed_in(context, api)
    await open_session(page, session_id)
    await send(page, "set it up")
    await expect(page.locator(CARD)).to_be_visible()
    return session_id, page


def answer_sent(stack: Stack, session_id: str) -> str:
    [sent] = tool_results_sent(stack, session_id)
    assert sent["tool_use_id"] == "call_ask" and not sent.get("is_error")
    return result_text(sent)


@pytest.mark.script(SCRIPT)
async def test_a_choice_answers_the_question(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await asking_page(stack, api, http, browser_context)
        card = page.locator(CARD)
        await expect(card.locator(".question-text")).to_have_text(
            "Which database should the new service use?"
        )
        await expect(card.locator("button.question-choice")).to_have_text(["SQLite", "PostgreSQL"])
        await expect(page.locator("#run-header .phase")).to_have_text("waiting for your answer")
        await screenshot(page, "question-card")
        await page.reload()  # rebuilt from the store's events
        await expect(page.locator(CARD)).to_be_visible()
        await page.locator(CARD).locator("button.question-choice", has_text="PostgreSQL").click()
        await expect(page.locator(CARD)).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
        assert answer_sent(stack, session_id) == "PostgreSQL"
        await expect(page.locator('.tool[data-call-id="call_ask"]')).to_have_attribute(
            "data-state", "done"
        )


@pytest.mark.script(SCRIPT)
async def test_an_answer_in_own_words_and_a_second_answer_is_refused(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await asking_page(stack, api, http, browser_context)
        second = await signed_in(browser_context, api)  # the same session open twice
        await open_session(second, session_id)
        await expect(second.locator(CARD)).to_be_visible()
        card = page.locator(CARD)
        await card.locator(".question-input").fill("Neither: use DuckDB")
        await card.locator(".question-input").press("Enter")
        await expect(card).to_have_count(0)
        # The other tab's card goes with the question_answered event...
        await expect(second.locator(CARD)).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
        assert answer_sent(stack, session_id) == "Neither: use DuckDB"
        # ... and a late answer over the API is refused.
        late = await http.post(
            f"/api/sessions/{session_id}/questions/call_ask/answer", json={"answer": "SQLite"}
        )
        assert late.status_code == 409
