"""What the browser tests share: signing in, opening a session, typing, screenshots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from support import ApiServer

SCREENSHOTS = Path(os.environ.get("DURAGENT_SCREENSHOTS", Path(__file__).parent / "screenshots"))
"""Where the tests save screenshots of the page's main states, for a reviewer to look at."""


def base_url(api: ApiServer) -> str:
    return f"http://127.0.0.1:{api.port}"


async def signed_in(
    context: Any, api: ApiServer, token: str = ApiServer.TOKEN, *, remember: bool = False
) -> Any:
    """A new tab of the page, signed in as the token's user."""
    from playwright.async_api import expect

    page = await context.new_page()
    await page.goto(base_url(api) + "/")
    await page.fill("#token", token)
    if remember:
        await page.check("#remember")
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#app")).to_be_visible()
    return page


async def open_session(page: Any, session_id: str) -> None:
    """Show a session and wait until its state is loaded."""
    from playwright.async_api import expect

    await page.evaluate("id => { location.hash = '#/s/' + id; }", session_id)
    await loaded(page, session_id)
    await expect(page.locator("#session")).to_have_attribute("data-loaded", "true")


async def loaded(page: Any, session_id: str) -> None:
    await page.wait_for_selector(f'#session[data-session="{session_id}"][data-loaded="true"]')


async def send(page: Any, text: str) -> None:
    """Type into the composer and press Enter, as a person does."""
    box = page.locator("#composer .box")
    await box.click()
    await box.fill(text)
    await box.press("Enter")


async def new_session(http: Any, name: str = "s") -> str:
    created = await http.post("/api/sessions", json={"name": name})
    assert created.status_code == 201, created.text
    return str(created.json()["session"]["id"])


async def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path
