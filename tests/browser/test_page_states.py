"""The page says what is going on, in words: the chips of the input queue, the run
header's counter, errors and what comes next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import (
    UNTIL_GO,
    ApiServer,
    Stack,
    bash_then_text,
    eventually,
    let_go,
    run_finished,
    user_texts,
)

from browser.pages import (
    CuttableNetwork,
    chips,
    loaded,
    screenshot,
    send,
    session_page,
)

pytestmark = pytest.mark.browser


@pytest.mark.script(bash_then_text(f"{UNTIL_GO}; echo built", "built"))
async def test_chips_say_what_waits_and_where_an_edit_went(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        await send(page, "also update the changelog")
        guidance = chips(page).first
        await guidance.locator("button.guide").click()
        await expect(guidance).to_have_attribute("data-kind", "guidance")
        await expect(guidance.locator("button")).to_have_count(2)  # edit, delete
        assert "null" not in await guidance.inner_text()
        # Edit takes a chip's text back into the box: nothing is thrown away.
        await send(page, "second thoughts")
        queued = chips(page).nth(1)
        await expect(queued).to_have_attribute("data-state", "pending")
        await queued.locator("button.edit").click()
        await expect(page.locator("#composer .box")).to_have_value("second thoughts")
        await expect(queued).to_have_attribute("data-state", "edited")
        await expect(queued).to_contain_text("moved back into the message box")
        assert "cancelled" not in await queued.inner_text()
        await screenshot(page, "chip-edited")
        (workspace / "go").touch()
        await eventually(lambda: run_finished(stack, session))


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo one"}}}]},
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": "echo two"}}}]},
                {"reply": [{"text": "first run done"}]},
                {"wait_for": "go", "reply": [{"text": "second run done"}]},
            ]
        }
    }
)
async def test_the_turn_counter_starts_again_with_a_new_run(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with api.client() as http:
        page, session = await session_page(browser_context, api, http)
        turn = page.locator("#run-header .turn")
        async with stack.worker():
            await send(page, "three turns")
            await expect(page.locator(".msg.assistant").last).to_contain_text("first run done")
            await expect(turn).to_have_text("turn 3")
            await eventually(lambda: run_finished(stack, session))
        # The state the page reads right after sending still has the last run as the latest
        # (no worker has started the new one): it arrives after the new run's first events.
        held: list[Any] = []

        async def hold(route: Any) -> None:
            if held:
                await route.continue_()
            else:
                held.append((route, await route.fetch()))

        await page.route("**/state?*", hold)
        await send(page, "once more")
        await eventually(lambda: bool(held))
        async with stack.worker():
            started = page.locator("#activity .event.turn_start")
            await expect(started).to_have_count(4)
            await expect(started.last).to_contain_text("Turn 1 started")
            route, stale = held[0]
            async with page.expect_request(lambda r: "/state?" in r.url):
                await route.fulfill(response=stale)
            await expect(turn).to_have_text("turn 1")
            await page.reload()  # and so it reads when the page loads mid-run
            await loaded(page, session)
            await expect(turn).to_have_text("turn 1")
            stack.model.release("go")
            await expect(page.locator(".msg.assistant").last).to_contain_text("second run done")
            await expect(turn).to_have_text("turn 1")
            await eventually(lambda: run_finished(stack, session))


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "back with you"}]}]}})
async def test_a_server_out_of_reach_is_said_in_words_and_cleared_when_back(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http, CuttableNetwork(api.port) as network:
        page, _ = await session_page(browser_context, api, http, url=network.url)
        network.cut()
        await expect(page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
        await send(page, "are you there?")
        error = page.locator("#composer .composer-error")
        await expect(error).to_contain_text("cannot reach the server")
        assert "Failed to fetch" not in await error.inner_text()
        await expect(page.locator("#composer .box")).to_have_value("are you there?")
        await screenshot(page, "server-out-of-reach")
        network.restore()
        await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        await expect(error).to_be_empty()
        await page.locator("#composer .box").press("Enter")
        await expect(page.locator(".msg.assistant").last).to_contain_text("back with you")


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "a worker took it"}]}]}})
async def test_a_message_no_worker_takes_yet_says_so(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with api.client() as http:
        page, session = await session_page(browser_context, api, http)
        await send(page, "start when you can")
        sent = page.locator('#composer .chip[data-state="starting"]')
        await expect(sent).to_contain_text("start when you can")
        await expect(sent).to_contain_text("No worker is answering")
        await expect(page.locator("#composer .box")).to_have_value("")
        await screenshot(page, "no-worker-yet")
        async with stack.worker():
            await expect(page.locator(".msg.assistant").last).to_contain_text("a worker took it")
            await expect(sent).to_have_count(0)
            await eventually(lambda: run_finished(stack, session))


@pytest.mark.script(bash_then_text(UNTIL_GO, "built", "took both", "took the note"))
async def test_chips_sent_while_busy_start_the_next_run_and_queued_ones_wait(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        page, session = await session_page(browser_context, api, http)
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        note = page.locator("#composer .queue-note")
        for text in ("first extra", "second extra"):
            await send(page, text)
        await expect(chips(page)).to_have_count(2)
        await expect(note).to_be_hidden()
        # The run ends: what was sent meanwhile starts the next run, both in it.
        let_go(stack, session)
        await expect(page.locator(".msg.assistant").last).to_contain_text("took both")
        await expect(chips(page)).to_have_count(0)
        await expect(note).to_be_hidden()
        users = page.locator(".msg.user")
        await expect(users).to_have_text(
            ["You" + t for t in ("build it", "first extra", "second extra")]
        )
        await eventually(lambda: run_finished(stack, session))
        # "Queue for the next run" keeps a chip for later: it waits, and says so.
        box = page.locator("#composer .box")
        await box.fill("a note for later")
        await page.locator("#composer .send-menu summary").click()
        await page.locator('#composer .send-option[data-mode="queue"]').click()
        await expect(chips(page)).to_have_count(1)
        await expect(note).to_contain_text("they go with your next message")
        await screenshot(page, "queued-after-the-run")
        await note.locator("button.send-queued").click()
        await expect(page.locator(".msg.assistant").last).to_contain_text("took the note")
        await expect(chips(page)).to_have_count(0)
    requests = stack.model.requests_for(session)
    assert user_texts(requests[2].body)[-2:] == ["first extra", "second extra"]
    assert user_texts(requests[-1].body)[-1] == "a note for later"
