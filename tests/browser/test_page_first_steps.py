"""What a new user meets first: empty states that say what to do, a session named after
its first prompt, the offline model called so, the tree's folded entries explained, and
the activity that follows the newest events after a tab switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, eventually, run_finished

from browser.pages import loaded, screenshot, send, session_page, signed_in

pytestmark = pytest.mark.browser

PROMPT = (
    "Refactor the parser to use pathlib everywhere, and keep the old behaviour for URLs\n"
    "then run the tests"
)


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo ok"}}}]},
                {"reply": [{"text": "refactored"}]},
            ]
        }
    }
)
async def test_a_new_user_is_told_what_to_do_and_what_answered(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker():
        page = await signed_in(browser_context, api)
        await expect(page.locator("#no-sessions")).to_contain_text("No sessions yet")
        await expect(page.locator("#no-session")).to_contain_text("New session")
        await screenshot(page, "first-visit")
        await page.click("#new-session")
        session = str(await page.locator("#session-list li").first.get_attribute("data-id"))
        await loaded(page, session)
        await expect(page.locator("#no-sessions")).to_be_hidden()
        await expect(page.locator("#conversation .empty-state")).to_contain_text("Type below")
        await expect(page.locator("#activity .empty-state")).to_contain_text("events show here")
        await send(page, PROMPT)
        await expect(page.locator(".msg.assistant").last).to_contain_text("refactored")
        await expect(page.locator("#conversation .empty-state")).to_be_hidden()
        await expect(page.locator("#activity .empty-state")).to_be_hidden()
        # Named after its first prompt: its first line, cut at a word.
        name = "Refactor the parser to use pathlib everywhere, and keep…"
        await expect(page.locator("#session-list .session-name").first).to_have_text(name)
        await expect(page.locator("#run-header .name")).to_have_text(name)
        # The header says the offline model answered, not Claude.
        await expect(page.locator("#run-header .model")).to_have_text("offline model (scripted)")
        await eventually(lambda: run_finished(stack, session))
        await page.click('.tabs button[data-tab="tree"]')
        folded = page.locator("#tree .folded").first
        await expect(folded).to_have_text("+2")
        await expect(folded).to_have_attribute(
            "title", "2 more entries on this line (replies, tool calls), folded into it"
        )
        await expect(page.locator("#tree .tree-note")).to_contain_text("“+N” counts the entries")
        await screenshot(page, "first-run-tree")


TURNS = 30


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                *(
                    {"reply": [{"tool_use": {"name": "bash", "input": {"command": f"echo {i}"}}}]}
                    for i in range(TURNS)
                ),
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": UNTIL_GO}}}]},
                {"reply": [{"text": "all done"}]},
                {"reply": [{"text": "again"}]},
            ]
        }
    }
)
async def test_the_activity_follows_the_newest_events_after_a_tab_switch(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        await send(page, "many small steps")
        await expect(page.locator(".tool").nth(TURNS)).to_have_attribute("data-state", "running")
        newest = page.locator("#activity .event").last
        await expect(newest).to_be_in_viewport()
        await page.click('.tabs button[data-tab="tree"]')
        await page.click('.tabs button[data-tab="activity"]')
        await expect(newest).to_be_in_viewport()
        await page.click('.tabs button[data-tab="tree"]')
        (workspace / "go").touch()  # events come while the activity is hidden
        await expect(page.locator(".msg.assistant").last).to_contain_text("all done")
        await page.click('.tabs button[data-tab="activity"]')
        await expect(page.locator("#activity .event.agent_end")).to_be_in_viewport()
        # A reader who scrolled up stays where they are.
        await page.evaluate("() => { document.querySelector('#activity').scrollTop = 0; }")
        await expect(page.locator("#activity .event").first).to_be_in_viewport()
        await send(page, "one more")
        await expect(page.locator("#activity .event.agent_start")).to_have_count(2)
        await expect(page.locator("#activity .event").first).to_be_in_viewport()
