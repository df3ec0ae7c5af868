"""Model output is inert; the token stays out of URLs; another user's session is not found."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from support import ApiServer, Stack

from browser.pages import base_url, loaded, new_session, open_session, screenshot, send, signed_in

pytestmark = pytest.mark.browser

HOSTILE = "\n".join(
    [
        "# Report",
        "Here is **bold**, `code` and a [fine link](https://example.com/docs).",
        "<script>window.__pwned = 'script'</script>",
        "<img src=x onerror=\"window.__pwned = 'img'\">",
        "[click me](javascript:window.__pwned='link')",
        "[sneaky](java\tscript:window.__pwned='tab')",
        "![tracker](https://tracker.example/pixel.png)",
        '<a href="javascript:alert(1)">raw anchor</a>',
        "| a | b |",
        "|---|---|",
        "| <b>x</b> | 2 |",
        "```html",
        "<iframe src=https://example.com></iframe>",
        "```",
    ]
)


@pytest.mark.script(
    {"conversations": {"*": [{"reply": [{"text": HOSTILE}], "chunk_delay_ms": 20}]}}
)
async def test_markdown_with_script_and_img_from_the_model_renders_inert(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    requested: list[str] = []
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        page = await signed_in(browser_context, api)
        page.on("request", lambda request: requested.append(request.url))
        await open_session(page, session)
        await send(page, "write a report")
        reply = page.locator(".msg.assistant").last
        await expect(reply).to_contain_text("raw anchor")
        for view in ("live and stored", "after a reload"):
            message = page.locator(".msg.assistant").last
            await expect(message).not_to_have_attribute("data-live", "")
            assert await page.evaluate("window.__pwned") is None, view
            for tag in ("script", "img", "iframe", "b"):
                assert await message.locator(tag).count() == 0, (view, tag)
            text = await message.inner_text()
            assert "<script>window.__pwned = 'script'</script>" in text
            assert "<img src=x onerror=\"window.__pwned = 'img'\">" in text
            links = await message.locator("a").evaluate_all(
                "links => links.map(a => [a.textContent, a.getAttribute('href'), a.rel])"
            )
            assert links == [
                ["fine link", "https://example.com/docs", "noopener noreferrer nofollow"],
                [
                    "image: tracker",
                    "https://tracker.example/pixel.png",
                    "noopener noreferrer nofollow",
                ],
            ]
            assert await message.locator("h3").inner_text() == "Report"
            assert await message.locator("strong").inner_text() == "bold"
            await screenshot(page, "markdown-inert")
            await page.reload()
            await loaded(page, session)
    # Nothing in the page asked another host for anything (the image is a link, not loaded).
    assert all(url.startswith(base_url(api)) for url in requested), requested


async def test_the_page_sets_a_content_security_policy(api: ApiServer) -> None:
    async with api.client(token=None) as http:
        page = await http.get("/")
        script = await http.get("/web/js/app.js")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "connect-src 'self'" in policy and "default-src 'none'" in policy
    assert "javascript" in script.headers["content-type"]


async def test_markdown_renderer_makes_only_safe_elements(
    api: ApiServer, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    await page.goto(base_url(api) + "/")
    report = await page.evaluate(
        """async (inputs) => {
        const { renderMarkdown } = await import("/web/js/markdown.js");
        const allowedTags = new Set(["P", "BR", "H3", "H4", "H5", "H6", "PRE", "CODE", "HR",
          "BLOCKQUOTE", "UL", "OL", "LI", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD",
          "STRONG", "EM", "DEL", "A", "SPAN"]);
        const allowedAttributes = new Set(["href", "rel", "target", "start", "data-lang", "class"]);
        const problems = [];
        for (const input of inputs) {
          const holder = document.createElement("div");
          holder.append(renderMarkdown(input));
          for (const node of holder.querySelectorAll("*")) {
            if (!allowedTags.has(node.tagName)) problems.push([input, node.tagName]);
            for (const attribute of node.attributes) {
              if (!allowedAttributes.has(attribute.name)) problems.push([input, attribute.name]);
            }
            const href = node.getAttribute("href");
            if (href !== null && !/^(https?:\\/\\/|\\/[^/]|\\.|#|[a-z0-9_-]+(\\/|$))/i.test(href)) {
              problems.push([input, href]);
            }
          }
        }
        return problems;
      }""",
        [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[x](javascript:alert(1))",
            "[x](JAVASCRIPT:alert(1))",
            "[x]( javascript:alert(1))",
            "[x](java\nscript:alert(1))",
            "[x](\x01javascript:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "[x](vbscript:msgbox)",
            "[x](//evil.example/)",
            "[x](file:///etc/passwd)",
            "<https://ok.example/>",
            "[ok](docs/page.md) and [top](#top)",
            '**<svg onload="alert(1)">**',
            "- <style>body{display:none}</style>\n- two",
            "| <x onclick=1> |\n|---|\n| y |",
            "```\n</code><script>alert(1)</script>\n```",
            "\\<b>escaped\\</b>",
            "1. one\n   - nested <a href='javascript:1'>",
        ],
    )
    assert report == []


async def test_sign_in_keeps_the_token_out_of_every_url(
    api: ApiServer, browser_context: Any
) -> None:
    page = await browser_context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(base_url(api) + "/")
    await page.fill("#token", "not-a-token")
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#sign-in-error")).to_have_text("That token is not valid.")
    await page.fill("#token", ApiServer.TOKEN)
    await page.click("#sign-in-form button[type=submit]")
    await expect(page.locator("#app")).to_be_visible()
    await page.click("#new-session")
    await expect(page.locator("#session")).to_have_attribute("data-loaded", "true")
    await screenshot(page, "signed-in")
    # Kept for this tab only (sessionStorage), unless the person asked to be remembered.
    assert await page.evaluate("sessionStorage.getItem('duragent.token')") == ApiServer.TOKEN
    assert await page.evaluate("localStorage.getItem('duragent.token')") is None
    assert requested and not [url for url in requested if ApiServer.TOKEN in url]
    await page.click("#sign-out")
    await expect(page.locator("#sign-in")).to_be_visible()
    assert await page.evaluate("sessionStorage.getItem('duragent.token')") is None


async def test_another_users_session_is_not_found(api: ApiServer, browser_context: Any) -> None:
    async with api.client(ApiServer.OTHER_TOKEN) as bob:
        bobs = await new_session(bob, "bob's secret")
    page = await signed_in(browser_context, api)  # alice
    await page.goto(f"{base_url(api)}/#/s/{bobs}")
    await expect(page.locator("#not-found")).to_contain_text("does not exist")
    assert "bob's secret" not in await page.locator("body").inner_text()
    await screenshot(page, "not-found")
