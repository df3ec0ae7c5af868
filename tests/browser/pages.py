"""What the browser tests share: signing in, opening a session, typing, screenshots."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from support import ApiServer

SCREENSHOTS = Path(os.environ.get("DURAGENT_SCREENSHOTS", Path(__file__).parent / "screenshots"))
"""Where the tests save screenshots of the page's main states, for a reviewer to look at."""


def base_url(api: ApiServer) -> str:
    return f"http://127.0.0.1:{api.port}"


async def signed_in(
    context: Any,
    api: ApiServer,
    token: str = ApiServer.TOKEN,
    *,
    remember: bool = False,
    url: str | None = None,
) -> Any:
    """A new tab of the page (at `url`, by default the API's), signed in as the token's user."""
    from playwright.async_api import expect

    page = await context.new_page()
    await page.goto((url or base_url(api)) + "/")
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


async def inner_texts(page: Any, selector: str) -> list[str]:
    """The text shown by each element `selector` matches, read in one step.

    `Locator.all_inner_texts` finds the elements in one call and reads them in a second:
    an element the page replaced in between (a stored message replacing its live version)
    is read detached, and a detached element's innerText is its textContent, without the
    line breaks of its layout.
    """
    return list(
        await page.evaluate(
            "selector => [...document.querySelectorAll(selector)].map((e) => e.innerText)",
            selector,
        )
    )


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


async def session_page(
    context: Any, api: ApiServer, http: Any, name: str = "s", *, url: str | None = None
) -> tuple[Any, str]:
    """A new session, open in a new signed-in tab (of the page at `url`, by default the
    API's): the tab and the session's id."""
    session = await new_session(http, name)
    page = await signed_in(context, api, url=url)
    await open_session(page, session)
    return page, session


def chips(page: Any) -> Any:
    """The pending chips above the composer."""
    return page.locator("#composer .chip")


async def screenshot(page: Any, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


class CuttableNetwork:
    """A TCP proxy in front of the API whose connections a test cuts, as a network drop
    does: open connections are reset and new ones refused until `restore()`.

    (Playwright's offline mode refuses new requests but leaves an open stream alone.)
    """

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.cut_off = False
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> CuttableNetwork:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        self.cut_off = True
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()

    def restore(self) -> None:
        self.cut_off = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        self._open.update((writer, up_writer))

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while chunk := await source.read(65536):
                    sink.write(chunk)
                    await sink.drain()
            sink.transport.abort() if self.cut_off else sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._open.difference_update((writer, up_writer))
