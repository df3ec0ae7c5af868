"""The conversation, live: streamed text, tool output, retries, a reload and a dropped
network mid-run, and a worker that goes down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, run_finished

from browser.pages import (
    CuttableNetwork,
    loaded,
    new_session,
    open_session,
    screenshot,
    send,
    signed_in,
)

pytestmark = pytest.mark.browser

WORDS = " ".join(f"word{i:03d}" for i in range(40))  # 319 characters: 16 streamed deltas


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": WORDS}], "chunk_delay_ms": 250}]}})
async def test_streamed_text_shows_before_the_turn_ends(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "talk")
        streaming = page.locator(".msg.assistant[data-live]")
        await expect(streaming).to_contain_text("word002")
        assert "word039" not in await streaming.inner_text()  # the reply is still coming
        assert not run_finished(stack, session)
        await screenshot(page, "streaming")
        stored = page.locator(".msg.assistant:not([data-live])")
        await expect(stored).to_have_text("Assistant" + WORDS)


@pytest.mark.script(bash_then_text(f"echo line-1; {UNTIL_GO}; echo line-2", "both lines printed"))
async def test_a_tool_card_shows_output_while_it_runs(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "run it")
        card = page.locator(".tool").first
        await expect(card.locator(".tool-output")).to_have_text("line-1\n")
        await expect(card).to_have_attribute("data-state", "running")
        await expect(card.locator(".tool-time[data-ticking]")).not_to_have_text("")
        await screenshot(page, "tool-running")
        (workspace / "go").touch()
        await expect(card).to_have_attribute("data-state", "done")
        await expect(card.locator(".tool-output")).to_contain_text("line-2")
        await expect(page.locator(".msg.assistant").last).to_contain_text("both lines printed")


async def page_snapshot(page: Any) -> dict[str, Any]:
    """What a person sees of the conversation, the chips and the activity area (clocks
    that tick are left out: they differ by the time taken to reload)."""
    return dict(
        await page.evaluate(
            """() => {
            const text = (selector) => {
                const copy = document.querySelector(selector).cloneNode(true);
                copy.querySelectorAll("[data-ticking]").forEach((node) => node.remove());
                return copy.innerText;
            };
            return {
                conversation: text("#conversation"),
                chips: text("#composer .chips"),
                activity: text("#activity"),
                seqs: [...document.querySelectorAll("#activity .event")].map((e) => e.dataset.seq),
            };
        }"""
        )
    )


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"thinking": "The user wants output."},
                        {"text": "Running the **build** now."},
                        {
                            "tool_use": {
                                "name": "bash",
                                "input": {"command": f"echo compiling; {UNTIL_GO}"},
                            }
                        },
                    ]
                },
                {"reply": [{"text": "built"}]},
            ]
        }
    }
)
async def test_a_reload_mid_run_shows_the_same_page(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "build it")
        await expect(page.locator(".tool .tool-output")).to_have_text("compiling\n")
        await send(page, "then run the tests")
        await send(page, "and lint")
        await expect(page.locator("#composer .chip")).to_have_count(2)
        await page.locator("#composer .chip").nth(1).locator("button.guide").click()
        await expect(page.locator("#composer .chip").nth(1)).to_have_attribute(
            "data-kind", "guidance"
        )
        await expect(page.locator("#activity .event").last).to_have_attribute(
            "data-type", "tool_execution_start"
        )
        before = await page_snapshot(page)
        await page.reload()
        await loaded(page, session)
        await expect(page.locator(".tool .tool-output")).to_have_text("compiling\n")
        after = await page_snapshot(page)
        assert after == before
        assert "Running the build now." in after["conversation"]
        assert after["chips"].count("then run the tests") == 1
        await screenshot(page, "reloaded-mid-run")
        (workspace / "go").touch()
        await eventually(lambda: run_finished(stack, session))


LONG = " ".join(f"w{i:03d}" for i in range(120))  # 599 characters: 30 deltas


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "reply": [
                        {"text": LONG},
                        {"tool_use": {"name": "bash", "input": {"command": "echo after"}}},
                    ],
                    "chunk_delay_ms": 200,
                },
                {"reply": [{"text": "the end"}]},
            ]
        }
    }
)
async def test_a_dropped_network_loses_and_repeats_no_event(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http, CuttableNetwork(api.port) as network:
        session = await new_session(http)
        page = await signed_in(browser_context, api, url=network.url)
        await open_session(page, session)
        await send(page, "talk for a while")
        streaming = page.locator(".msg.assistant[data-live]")
        await expect(streaming).to_contain_text("w005")
        network.cut()
        badge = page.locator("#connection")
        await expect(badge).to_have_attribute("data-state", "reconnecting")
        await screenshot(page, "reconnecting")
        # The run goes on while the page is cut off: wait until the model has sent more.
        (request,) = stack.model.requests_for(session)
        sent_before = len(request.deltas_sent_at)
        await eventually(
            lambda: len(stack.model.requests_for(session)[0].deltas_sent_at) >= sent_before + 5
        )
        network.restore()
        await expect(badge).to_have_attribute("data-state", "live")
        await expect(page.locator(".msg.assistant").last).to_contain_text("the end")
        await eventually(lambda: run_finished(stack, session))
        state = (await http.get(f"/api/sessions/{session}/state")).json()
        events = state["activity_events"]
        await expect(page.locator("#session")).to_have_attribute(
            "data-last-seq", str(events[-1]["seq"])
        )
    # Every event was applied exactly once, and the activity lists each once, in order.
    assert await page.get_attribute("#session", "data-applied") == str(len(events))
    quiet = {"message_update", "message_start", "message_end", "tool_execution_update"}
    shown = await page.locator("#activity .event").evaluate_all(
        "rows => rows.map(r => r.dataset.seq)"
    )
    assert shown == [str(e["seq"]) for e in events if e["type"] not in quiet]
    assert LONG in await page.locator("#conversation").inner_text()


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"error": {"status": 529, "retry_after": 2}},
                {"reply": [{"text": "answered on the second try"}]},
            ]
        }
    }
)
async def test_a_retry_shows_its_countdown(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "hello")
        notice = page.locator(".retry-notice")
        await expect(notice).to_contain_text("Retry 1 in")
        await expect(page.locator("#activity .event.retry_scheduled")).to_be_visible()
        await screenshot(page, "retry-countdown")
        await expect(page.locator(".msg.assistant").last).to_contain_text("second try")
        await expect(notice).to_be_hidden()


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": UNTIL_GO}}}]},
                {"reply": [{"text": "carried on"}]},
            ]
        }
    }
)
async def test_a_worker_that_is_down_shows_as_such(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    worker = stack.spawn_worker()
    async with api.client() as http:
        session = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "work")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        stack.kill(worker)
        banner = page.locator("#run-header .worker-down")
        await expect(banner).to_be_visible(timeout=30_000)
        await screenshot(page, "worker-down")
        async with stack.worker():  # a worker is back: the run goes on
            await expect(banner).to_be_hidden(timeout=30_000)
            await expect(page.locator(".msg.assistant").last).to_contain_text("carried on")


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                *({"reply": [{"tool_use": {"name": "ls", "input": {}}}]} for _ in range(110)),
                {"reply": [{"text": "listed 110 times"}]},
            ]
        }
    }
)
async def test_a_long_session_opens_on_its_newest_page_and_pages_back(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        await http.post(f"/api/sessions/{session}/input", json={"text": "the very first words"})
        await eventually(lambda: run_finished(stack, session), timeout=120)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        conversation = page.locator("#conversation")
        await expect(page.locator(".msg.assistant").last).to_contain_text("listed 110 times")
        earlier = page.locator("#conversation .earlier")
        await expect(earlier).to_be_visible()  # 222 display messages: the newest 200 shown
        assert "the very first words" not in await conversation.inner_text()
        await conversation.evaluate("node => { node.scrollTop = 0; }")
        await expect(page.locator(".msg.user")).to_have_text(["Youthe very first words"])
        await expect(earlier).to_be_hidden()
        cards = page.locator(".tool")
        await expect(cards).to_have_count(110)
        await expect(page.locator('.tool[data-state="done"]')).to_have_count(110)
