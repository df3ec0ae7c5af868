"""The approval card: a waiting tool call shows its arguments and Approve / Always / Deny;
the card goes when the call is decided, here or from another client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call, calls_then_text, tool_results_sent
from playwright.async_api import expect
from support import ApiServer, Stack, eventually, run_finished

from browser.pages import new_session, open_session, screenshot, send, signed_in

pytestmark = pytest.mark.browser

SCRIPT = calls_then_text([bash_call("echo ran > out.txt", "call_write")], "All done.")
CARD = '.tool[data-call-id="call_write"] .approval'


async def waiting_page(stack: Stack, api: ApiServer, http: Any, context: Any) -> tuple[str, Any]:
    """A session whose bash call waits for approval, open in the page."""
    session_id = await new_session(http)
    put = await http.put(
        f"/api/sessions/{session_id}/approval-policy",
        json={"policy": ASK_BASH.model_dump(mode="json")},
    )
    assert put.status_code == 200, put.text
    page = await signed_in(context, api)
    await open_session(page, session_id)
    await send(page, "write it")
    await expect(page.locator(CARD)).to_be_visible()
    return session_id, page


@pytest.mark.script(SCRIPT)
async def test_the_card_shows_the_arguments_and_approves(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        card = page.locator(CARD)
        await expect(card.locator(".approval-args")).to_contain_text("echo ran > out.txt")
        await expect(page.locator("#run-header .phase")).to_have_text("waiting for approval")
        await screenshot(page, "approval-card")
        await card.locator("button.approval-approve").click()
        await expect(card).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
        workspace = Path((await stack.client.sessions.get(session_id)).workspace)
        assert (workspace / "out.txt").read_text() == "ran\n"
        await expect(page.locator('.tool[data-call-id="call_write"]')).to_have_attribute(
            "data-state", "done"
        )


@pytest.mark.script(SCRIPT)
async def test_deny_with_a_reason_from_the_card(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        card = page.locator(CARD)
        await card.locator(".approval-reason").fill("not today")
        await card.locator("button.approval-deny").click()
        await expect(card).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
        [sent] = tool_results_sent(stack, session_id)
        assert sent["is_error"] is True and "Reason: not today" in str(sent["content"])


@pytest.mark.script(SCRIPT)
async def test_the_card_goes_when_another_client_decides(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session_id, page = await waiting_page(stack, api, http, browser_context)
        other = await signed_in(browser_context, api)
        await open_session(other, session_id)
        await expect(other.locator(CARD)).to_be_visible()
        await stack.client.approvals.approve(session_id, "call_write")  # a third client: the CLI's
        await expect(page.locator(CARD)).to_have_count(0)
        await expect(other.locator(CARD)).to_have_count(0)
        await eventually(lambda: run_finished(stack, session_id))
