"""Browser tests: the web page in the system's Chromium (Debian's `chromium`), driven by
Playwright, against the real HTTP API, a real worker, the dev server and the offline model.

One browser per test module; each test gets fresh browser contexts (no shared storage).
Without Chromium the tests are skipped, unless `DURAGENT_REQUIRE_BROWSER` is set (CI sets
it): then they fail.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from processes import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    if not CHROMIUM.exists():
        reason = f"Chromium is not installed at {CHROMIUM} (Debian: apt-get install chromium)"
        if os.environ.get("DURAGENT_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=20_000)  # a loaded machine is slow, never wrong
    async with async_playwright() as playwright:
        # Playwright launches it with a fresh temporary profile (user data directory).
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def browser_context(browser: Any) -> AsyncIterator[Any]:
    """A fresh browser profile's context (cookies, storage); pages open in it as tabs."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(20_000)
    try:
        yield context
    finally:
        await context.close()
