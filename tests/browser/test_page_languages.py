"""The page's labels in the reader's language (the browser's): English or Chinese, never
both in one label (a machine without a CJK font showed "□□ Edit")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, let_go, run_finished

from browser.pages import chips, screenshot, send, session_page

pytestmark = pytest.mark.browser

CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
LATIN = re.compile(r"[A-Za-z]")


async def labels(page: Any) -> list[str]:
    """The text of every button, tab, summary and label shown."""
    shown = await page.evaluate(
        """() => [...document.querySelectorAll("button, summary, [role=tab], label")]
            .filter((node) => node.getClientRects().length)
            .map((node) => node.innerText.trim())"""
    )
    return [str(text) for text in shown if text]


async def a_busy_page_with_a_chip(api: ApiServer, context: Any) -> tuple[Any, str]:
    async with api.client() as http:
        page, session = await session_page(context, api, http)
    await send(page, "build it")
    await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
    await send(page, "then the docs")
    await expect(chips(page)).to_have_count(1)
    return page, session


CHINESE = {
    "chips": ["编辑", "引导", "删除"],
    "send": "发送",
    "tabs": ["活动", "树", "定时"],
    "stop": "停止",
}
ENGLISH = {
    "chips": ["Edit", "Guide", "Delete"],
    "send": "Send",
    "tabs": ["Activity", "Tree", "Schedules"],
    "stop": "Stop",
}


@pytest.mark.parametrize(
    ("locale", "expected"), [("zh-CN", CHINESE), ("en-GB", ENGLISH)], ids=["chinese", "english"]
)
@pytest.mark.script(bash_then_text(UNTIL_GO, "built"))
async def test_labels_are_in_the_browsers_language_and_one_language_each(
    stack: Stack, api: ApiServer, browser: Any, locale: str, expected: dict[str, Any]
) -> None:
    context = await browser.new_context(locale=locale, viewport={"width": 1400, "height": 900})
    try:
        async with stack.worker():
            page, session = await a_busy_page_with_a_chip(api, context)
            await expect(chips(page).locator("button")).to_have_text(expected["chips"])
            await expect(page.locator("#composer .send")).to_have_text(expected["send"])
            await expect(page.locator(".tabs button")).to_have_text(expected["tabs"])
            await expect(page.locator("#run-header .stop")).to_have_text(expected["stop"])
            shown = await labels(page)
            if expected is CHINESE:
                assert await page.evaluate("document.documentElement.lang") == "zh-Hans"
                mixed = [text for text in shown if CJK.search(text) and LATIN.search(text)]
                assert not mixed, mixed
                await screenshot(page, "labels-chinese")
            else:
                assert not [text for text in shown if CJK.search(text)], shown
            let_go(stack, session)
            await eventually(lambda: run_finished(stack, session))
    finally:
        await context.close()
