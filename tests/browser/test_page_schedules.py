"""Schedules on the page: the Schedules tab adds one to the open session, its firing's
prompt shows in the conversation marked as scheduled, and the tab pauses, resumes and
deletes it."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from support import ApiServer, Stack

from browser.pages import screenshot, session_page

pytestmark = pytest.mark.browser

SCRIPT = {"conversations": {"*": [{"match": "^tick", "repeat": True, "reply": [{"text": "tock"}]}]}}


@pytest.mark.script(SCRIPT)
async def test_a_schedule_made_on_the_page_fires_and_is_marked(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        await page.click('.tabs button[data-tab="schedules"]')
        panel = page.locator("#schedules")
        await expect(panel.locator(".schedules-note")).to_contain_text("No schedules")
        await panel.locator(".schedule-prompt").fill("tick")
        await panel.locator(".schedule-timing").fill("2s")
        await panel.locator(".schedule-busy").select_option("skip")
        await panel.locator(".schedule-form button[type=submit]").click()
        row = panel.locator(".schedule")
        await expect(row).to_have_count(1)
        await expect(row.locator(".schedule-when")).to_have_text("every 2s")
        await expect(row.locator(".schedule-meta")).to_contain_text("busy: skip")
        schedule_id = await row.get_attribute("data-id")
        assert schedule_id
        try:
            # Its firing's prompt, marked as the schedule's, and the answer.
            scheduled = page.locator(f'#conversation .msg.user[data-scheduled="{schedule_id}"]')
            await expect(scheduled.first).to_be_visible(timeout=30_000)
            await expect(scheduled.first.locator(".who")).to_have_text("Scheduled")
            await expect(page.locator("#conversation .msg.assistant").first).to_contain_text("tock")
            await row.locator("button.pause").click()
            await expect(row.locator(".schedule-state")).to_have_text("paused")
            await screenshot(page, "schedules")
            await row.locator("button.resume").click()
            await expect(row.locator(".schedule-state")).to_have_text("active")
            await row.locator("button.delete").click()
            await expect(row).to_have_count(0)
        finally:
            await http.delete(f"/api/schedules/{schedule_id}")
        assert (await http.get(f"/api/sessions/{session}/schedules")).json() == []
