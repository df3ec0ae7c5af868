"""The page on every screen: a phone and a tablet show one pane at a time (sessions,
conversation, activity) with a way to switch, nothing wider than the screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text

from browser.pages import screenshot, send, session_page

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
TABLET = {"width": 768, "height": 1024}


async def overflow(page: Any) -> dict[str, Any]:
    """How wide the document is, and the shown elements that reach past the screen."""
    return dict(
        await page.evaluate(
            """() => {
            const width = window.innerWidth;
            const past = [];
            for (const node of document.querySelectorAll("body *")) {
                const box = node.getBoundingClientRect();
                if (!box.width || !box.height) continue;
                if (box.left < -1 || box.right > width + 1) {
                    past.push(`${node.tagName}.${node.className} ${box.left}..${box.right}`);
                }
            }
            return { scroll: document.documentElement.scrollWidth, width, past: past.slice(0, 10) };
        }"""
        )
    )


async def box(page: Any, selector: str) -> dict[str, float]:
    found = await page.locator(selector).bounding_box()
    assert found is not None, f"{selector} is not shown"
    return dict(found)


async def fits(page: Any) -> None:
    seen = await overflow(page)
    assert seen["scroll"] <= seen["width"], seen
    assert not seen["past"], seen


@pytest.mark.parametrize("screen", [PHONE, TABLET], ids=["phone", "tablet"])
@pytest.mark.script(bash_then_text(f"echo compiling; {UNTIL_GO}", "built"))
async def test_a_narrow_screen_shows_one_pane_at_a_time(
    stack: Stack, api: ApiServer, browser: Any, screen: dict[str, int]
) -> None:
    name = "phone" if screen is PHONE else "tablet"
    context = await browser.new_context(viewport=screen)
    try:
        async with stack.worker(), api.client() as http:
            page, session = await session_page(context, api, http, "a long task on a small screen")
            workspace = Path(stack.client.sessions.get(session).workspace)
            # The conversation is the pane shown; the list and the activity wait behind
            # the switcher.
            conversation = page.locator("#conversation")
            await expect(conversation).to_be_visible()
            await expect(page.locator("#session-list")).to_be_hidden()
            await expect(page.locator("#activity")).to_be_hidden()
            await send(page, "build it")
            await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
            await expect(page.locator("#run-header .stop")).to_be_enabled()
            await fits(page)
            composer = await box(page, "#composer .box")
            assert composer["width"] >= (300 if screen is PHONE else 600), composer
            assert (await box(page, "#conversation"))["width"] >= screen["width"] - 2
            assert (await box(page, "#conversation"))["height"] >= 200
            stop = await box(page, "#run-header .stop")
            assert stop["x"] >= 0 and stop["x"] + stop["width"] <= screen["width"]
            await screenshot(page, f"{name}-conversation")
            # The activity, then the sessions, each on the whole screen.
            await page.click('#panes button[data-pane="activity"]')
            await expect(page.locator("#activity")).to_be_visible()
            await expect(page.locator("#activity")).to_contain_text("Tool bash started")
            await expect(conversation).to_be_hidden()
            assert (await box(page, "#activity"))["width"] >= screen["width"] - 2
            await fits(page)
            await screenshot(page, f"{name}-activity")
            await page.click('#panes button[data-pane="sessions"]')
            await expect(page.locator("#session-list")).to_be_visible()
            await expect(page.locator("#activity")).to_be_hidden()
            await fits(page)
            await screenshot(page, f"{name}-sessions")
            # Choosing a session shows its conversation again.
            await page.locator(f'#session-list li[data-id="{session}"] a').click()
            await expect(conversation).to_be_visible()
            await expect(page.locator("#session-list")).to_be_hidden()
            (workspace / "go").touch()
            await expect(page.locator(".msg.assistant").last).to_contain_text("built")
            await fits(page)
    finally:
        await context.close()


@pytest.mark.script(bash_then_text(f"echo compiling; {UNTIL_GO}", "built"))
async def test_a_desktop_shows_the_three_panes_side_by_side(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http, "desk")
        workspace = Path(stack.client.sessions.get(session).workspace)
        await expect(page.locator("#panes")).to_be_hidden()
        for pane in ("#session-list", "#conversation", "#activity"):
            await expect(page.locator(pane)).to_be_visible()
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        await fits(page)
        await screenshot(page, "desktop-conversation")
        (workspace / "go").touch()
        await expect(page.locator(".msg.assistant").last).to_contain_text("built")
