"""The conversation, live: streamed text, tool cards, Stop, reload and a dropped network."""

from __future__ import annotations

import pytest
from playwright.async_api import expect
from support import ApiServer, Stack

from browser.pages import screenshot, send, signed_in

pytestmark = pytest.mark.browser


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"text": "Let me **look**."},
                        {"tool_use": {"name": "bash", "input": {"command": "echo hi"}}},
                    ]
                },
                {"reply": [{"text": "All done: `hi` printed."}]},
            ]
        }
    }
)
async def test_smoke(stack: Stack, api: ApiServer, browser_context: object) -> None:
    async with stack.worker():
        page = await signed_in(browser_context, api)
        await page.click("#new-session")
        await page.wait_for_selector('#session[data-loaded="true"]')
        await send(page, "say hi")
        await expect(page.locator(".msg.assistant").last).to_contain_text("All done")
        await expect(page.locator(".tool")).to_have_attribute("data-state", "done")
        await screenshot(page, "smoke")
