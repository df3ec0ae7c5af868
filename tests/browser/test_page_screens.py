"""The page on every screen: a phone and a tablet show one pane at a time (sessions,
conversation, activity) with a way to switch, nothing wider than the screen (a question
card and the Schedules tab included)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text

from browser.pages import screenshot, send, session_page
from browser.test_page_questions import CARD as QUESTION_CARD
from browser.test_page_questions import SCRIPT as QUESTION_SCRIPT
from browser.test_page_questions import asking_page

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


async def fits(page: Any, *, touch: bool = False) -> None:
    """Nothing wider than the screen; with `touch`, sized for fingers too."""
    seen = await overflow(page)
    assert seen["scroll"] <= seen["width"], seen
    assert not seen["past"], seen
    if touch:
        await fit_for_fingers(page)


async def fit_for_fingers(page: Any) -> None:
    """On a touch screen: every shown button at least 40 px high, every shown field's
    text at least 16 px (smaller, a phone's browser zooms in when it takes focus)."""
    small = await page.evaluate(
        """() => {
        const small = [];
        for (const node of document.querySelectorAll("button, select, input, textarea")) {
            const box = node.getBoundingClientRect();
            if (!box.width || !box.height || node.type === "checkbox") continue;
            const size = parseFloat(getComputedStyle(node).fontSize);
            const field = node.tagName !== "BUTTON";
            if ((!field || node.tagName === "SELECT") && box.height < 40) {
                small.push(`${node.tagName}.${node.className} ${box.height} px high`);
            }
            if (field && size < 16) small.push(`${node.tagName}.${node.className} ${size} px text`);
        }
        return small;
    }"""
    )
    assert not small, small


def touch_screen(browser: Any, screen: dict[str, int]) -> Any:
    """A context like a phone's or a tablet's browser: that wide, with touch."""
    return browser.new_context(viewport=screen, is_mobile=True, has_touch=True)


@pytest.mark.parametrize("screen", [PHONE, TABLET], ids=["phone", "tablet"])
@pytest.mark.script(bash_then_text(f"echo compiling; {UNTIL_GO}", "built"))
async def test_a_narrow_screen_shows_one_pane_at_a_time(
    stack: Stack, api: ApiServer, browser: Any, screen: dict[str, int]
) -> None:
    name = "phone" if screen is PHONE else "tablet"
    context = await touch_screen(browser, screen)
    try:
        async with stack.worker(), api.client() as http:
            page, session = await session_page(context, api, http, "a long task on a small screen")
            workspace = Path((await stack.client.sessions.get(session)).workspace)
            # The conversation is the pane shown; the list and the activity wait behind
            # the switcher.
            conversation = page.locator("#conversation")
            await expect(conversation).to_be_visible()
            await expect(page.locator("#session-list")).to_be_hidden()
            await expect(page.locator("#activity")).to_be_hidden()
            await send(page, "build it")
            await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
            await expect(page.locator("#run-header .stop")).to_be_enabled()
            await fits(page, touch=True)
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
            await fits(page, touch=True)
            await screenshot(page, f"{name}-activity")
            await page.click('#panes button[data-pane="sessions"]')
            await expect(page.locator("#session-list")).to_be_visible()
            await expect(page.locator("#activity")).to_be_hidden()
            await fits(page, touch=True)
            await screenshot(page, f"{name}-sessions")
            # Choosing a session shows its conversation again.
            await page.locator(f'#session-list li[data-id="{session}"] a').click()
            await expect(conversation).to_be_visible()
            await expect(page.locator("#session-list")).to_be_hidden()
            (workspace / "go").touch()
            await expect(page.locator(".msg.assistant").last).to_contain_text("built")
            await fits(page, touch=True)
    finally:
        await context.close()


@pytest.mark.script(bash_then_text(f"echo compiling; {UNTIL_GO}", "built"))
async def test_a_desktop_shows_the_three_panes_side_by_side(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http, "desk")
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        await expect(page.locator("#panes")).to_be_hidden()
        for pane in ("#session-list", "#conversation", "#activity"):
            await expect(page.locator(pane)).to_be_visible()
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        await fits(page)
        await screenshot(page, "desktop-conversation")
        (workspace / "go").touch()
        await expect(page.locator(".msg.assistant").last).to_contain_text("built")


@pytest.mark.parametrize("screen", [PHONE, TABLET], ids=["phone", "tablet"])
@pytest.mark.script(QUESTION_SCRIPT)
async def test_a_question_and_the_schedules_fit_a_narrow_screen(
    stack: Stack, api: ApiServer, browser: Any, screen: dict[str, int]
) -> None:
    """The question card (its choices and its input) and the Schedules tab (its form and a
    schedule's row) fit a phone and a tablet, as the conversation does."""
    name = "phone" if screen is PHONE else "tablet"
    context = await touch_screen(browser, screen)
    schedule_id = None
    try:
        async with stack.worker(), api.client() as http:
            _, page = await asking_page(stack, api, http, context)
            card = page.locator(QUESTION_CARD)
            await expect(card.locator("button.question-choice")).to_have_count(2)
            await fits(page, touch=True)
            for part in (".question-text", ".question-input", "button.question-choice >> nth=1"):
                shown = await box(page, f"{QUESTION_CARD} {part}")
                assert shown["x"] >= 0 and shown["x"] + shown["width"] <= screen["width"], part
            await screenshot(page, f"{name}-question")
            await page.click('#panes button[data-pane="activity"]')
            await page.click('.tabs button[data-tab="schedules"]')
            panel = page.locator("#schedules")
            await panel.locator(".schedule-prompt").fill(
                "check the nightly build and say what broke"
            )
            await panel.locator(".schedule-timing").fill("1h")
            await panel.locator(".schedule-form button[type=submit]").click()
            row = panel.locator(".schedule")
            await expect(row).to_have_count(1)
            schedule_id = await row.get_attribute("data-id")
            await fits(page, touch=True)
            for part in (".schedule-prompt", ".schedule-form button[type=submit]", ".schedule"):
                shown = await box(page, f"#schedules {part}")
                assert shown["x"] >= 0 and shown["x"] + shown["width"] <= screen["width"], part
            await screenshot(page, f"{name}-schedules")
            await http.delete(f"/api/schedules/{schedule_id}")
            schedule_id = None
    finally:
        await context.close()
        if schedule_id is not None:
            with contextlib.suppress(Exception):
                await stack.client.schedules.delete(schedule_id)
