"""Guidance leaves a trace: the conversation says where the model received it, in words,
and a tool call it interrupted links to it; a reload shows the same."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, run_finished

from browser.pages import chips, loaded, screenshot, send, session_page

pytestmark = pytest.mark.browser

POINT_NAMES = ("during_tool_interrupted", "after_tool", "before_model", "before_finish")


async def shown_text(page: Any) -> str:
    """The page's text but the activity's event type names (the events' own names)."""
    return str(
        await page.evaluate(
            """() => {
            const copy = document.body.cloneNode(true);
            copy.querySelectorAll("#activity .type").forEach((node) => node.remove());
            return copy.innerText;
        }"""
        )
    )


async def the_trace_is_shown(page: Any) -> None:
    mark = page.locator("#conversation .guidance-mark")
    await expect(mark).to_have_count(1)
    await expect(mark).to_contain_text("stop, use the staging db instead")
    await expect(mark).to_contain_text("interrupted the running")
    await expect(mark.locator("code").first).to_contain_text("while [ ! -f go ]")
    card = page.locator(".tool").first
    await expect(card).to_have_attribute("data-state", "interrupted")
    link = card.locator(".guidance-link")
    await expect(link).to_contain_text("Interrupted by your guidance")
    # The trace comes after the interrupted call and before the answer it led to.
    order = await page.evaluate(
        """() => [...document.querySelectorAll("#conversation .msg, #conversation .guidance-mark")]
            .map((node) => node.dataset.role || "guidance")"""
    )
    assert order == ["user", "assistant", "guidance", "assistant"], order
    assert "stop, use the staging db" not in await page.locator(".msg.user").all_inner_texts()
    text = await shown_text(page)
    assert not [name for name in POINT_NAMES if name in text], text


@pytest.mark.script(bash_then_text(f"echo started; {UNTIL_GO}", "switched to the staging db"))
async def test_guidance_that_interrupts_a_tool_leaves_a_trace_where_it_was_taken(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        await send(page, "run the tests")
        card = page.locator(".tool").first
        await expect(card.locator(".tool-output")).to_contain_text("started")
        await send(page, "stop, use the staging db instead")
        await chips(page).locator("button.guide").click()
        await expect(page.locator(".msg.assistant").last).to_contain_text("switched to the")
        await the_trace_is_shown(page)
        await expect(chips(page)).to_have_count(0)  # the chip has gone
        await eventually(lambda: run_finished(stack, session))
        await page.reload()
        await loaded(page, session)
        await the_trace_is_shown(page)
        # The card's link leads to the trace.
        await page.evaluate("() => { document.querySelector('#conversation').scrollTop = 0; }")
        await card.locator(".guidance-link").click()
        await expect(page.locator("#conversation .guidance-mark")).to_be_in_viewport()
        await screenshot(page, "guidance-trace")
