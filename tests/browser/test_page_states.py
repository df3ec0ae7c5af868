"""The page says what is going on, in words: the chips of the input queue, the run
header's counter, errors and what comes next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, run_finished

from browser.pages import chips, screenshot, send, session_page

pytestmark = pytest.mark.browser


@pytest.mark.script(bash_then_text(f"{UNTIL_GO}; echo built", "built"))
async def test_chips_say_what_waits_and_where_an_edit_went(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        workspace = Path(stack.client.sessions.get(session).workspace)
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        await send(page, "also update the changelog")
        guidance = chips(page).first
        await guidance.locator("button.guide").click()
        await expect(guidance).to_have_attribute("data-kind", "guidance")
        await expect(guidance.locator("button")).to_have_count(2)  # edit, delete
        assert "null" not in await guidance.inner_text()
        # Edit takes a chip's text back into the box: nothing is thrown away.
        await send(page, "second thoughts")
        queued = chips(page).nth(1)
        await expect(queued).to_have_attribute("data-state", "pending")
        await queued.locator("button.edit").click()
        await expect(page.locator("#composer .box")).to_have_value("second thoughts")
        await expect(queued).to_have_attribute("data-state", "edited")
        await expect(queued).to_contain_text("moved back into the message box")
        assert "cancelled" not in await queued.inner_text()
        await screenshot(page, "chip-edited")
        (workspace / "go").touch()
        await eventually(lambda: run_finished(stack, session))
