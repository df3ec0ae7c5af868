"""The session list (newest first, create, rename, switch) and the tree (go to, fork, label)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, run_finished

from browser.pages import loaded, new_session, open_session, screenshot, send, signed_in

pytestmark = pytest.mark.browser


@pytest.mark.script({"conversations": {"*": [{"wait_for": "go", "reply": [{"text": "done"}]}]}})
async def test_the_session_list_creates_renames_and_switches(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        older = await new_session(http, "older")
        newer = await new_session(http, "newer")
        page = await signed_in(browser_context, api)
        names = page.locator("#session-list .session-name")
        await expect(names).to_have_text(["newer", "older"])
        await page.click("#new-session")
        await expect(names).to_have_count(3)
        created = await page.locator("#session-list li").first.get_attribute("data-id")
        assert created not in (older, newer)
        await loaded(page, str(created))
        await page.click("#run-header button.rename")
        await page.fill("#run-header .rename-input", "my new session")
        await page.press("#run-header .rename-input", "Enter")
        await expect(names.first).to_have_text("my new session")
        assert (await stack.client.sessions.get(str(created))).name == "my new session"
        await page.click(f'#session-list li[data-id="{older}"] a')
        await loaded(page, older)
        await send(page, "work")
        status = page.locator(f'#session-list li[data-id="{older}"] .status')
        await expect(status).to_have_text("running")
        await expect(names.first).to_have_text("older")  # the most recently active first
        await screenshot(page, "session-list")
        stack.model.release("go")
        await expect(status).to_have_text("idle")


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"text": "first answer"}]},
                {"reply": [{"text": "second answer"}]},
            ]
        }
    }
)
async def test_the_tree_goes_to_forks_from_and_labels_entries(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http, "tree")
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "first question")
        await expect(page.locator(".msg.assistant").last).to_have_text("Assistantfirst answer")
        await eventually(lambda: run_finished(stack, session))
        await send(page, "second question")
        await expect(page.locator(".msg.assistant").last).to_have_text("Assistantsecond answer")
        await eventually(lambda: run_finished(stack, session))
        await page.click('.tabs button[data-tab="tree"]')
        users = page.locator("#tree .node.user")
        await expect(users).to_have_count(2)
        await expect(page.locator("#tree .node .leaf")).to_have_count(1)
        # Go back to the second question: its text comes back into the composer to edit.
        await users.nth(1).locator("button.goto").click()
        await expect(page.locator("#composer .box")).to_have_value("second question")
        current = page.locator("#tree .node:has(.leaf)")
        await expect(current).to_contain_text("first answer")
        # Label the first question.
        first_id = await users.first.get_attribute("data-id")
        await users.first.locator("button.set-label").click()
        await page.fill("#tree .label-input", "the start")
        await page.click("#tree button.save-label")
        await expect(users.first.locator(".label")).to_have_text("the start")
        await screenshot(page, "tree")
        # Fork from the first answer: a new session with that history opens.
        await page.locator("#tree .node", has_text="first answer").locator("button.fork").click()
        await expect(page.locator("#session-list .session-name").first).to_have_text("tree (fork)")
        forked = await page.locator("#session-list li").first.get_attribute("data-id")
        await loaded(page, str(forked))
        await expect(page.locator("#conversation")).to_contain_text("first answer")
        assert "second question" not in await page.locator("#conversation").inner_text()
    assert await stack.client.tree.labels(session) == {first_id: "the start"}


@pytest.mark.script(bash_then_text(UNTIL_GO, "steered", "followed up"))
async def test_steer_and_follow_up_from_the_send_menu(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        workspace = Path((await stack.client.sessions.get(session)).workspace)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "start")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        for mode, text in (("steer", "use pathlib"), ("follow-up", "then add tests")):
            await page.fill("#composer .box", text)
            await page.click("#composer .send-menu summary")
            await page.click(f'#composer .send-option[data-mode="{mode}"]')
            await expect(page.locator("#composer .box")).to_have_value("")
        await expect(page.locator("#composer .chip")).to_have_count(0)  # not queue items
        (workspace / "go").touch()
        await expect(page.locator(".msg.assistant").last).to_contain_text("followed up")
    requests = stack.model.requests_for(session)
    assert "use pathlib" in str(requests[1].body["messages"])
    assert "then add tests" in str(requests[2].body["messages"])


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "answered in the terminal"}]}]}})
async def test_the_operator_sees_the_command_line_sessions(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        # As `duragent run` makes them: no owner.
        local = (await stack.client.sessions.create(name="from the terminal")).id
        await stack.client.runs.prompt(local, "hello from the shell")
        await eventually(lambda: run_finished(stack, local))
        mine = await new_session(http, "alice's")
        operator = await signed_in(browser_context, api, ApiServer.OPERATOR_TOKEN)
        names = operator.locator("#session-list .session-name")
        await expect(names).to_have_text(["from the terminal"])
        await open_session(operator, local)
        await expect(operator.locator(".msg.assistant")).to_contain_text("answered in the terminal")
        await screenshot(operator, "operator-sees-cli-session")
        # Another user sees neither the command line's sessions nor the operator sees hers.
        alice = await signed_in(browser_context, api)
        await expect(alice.locator("#session-list .session-name")).to_have_text(["alice's"])
        await alice.evaluate("id => { location.hash = '#/s/' + id; }", local)
        await expect(alice.locator("#not-found")).to_contain_text("does not exist")
        async with api.client(ApiServer.OPERATOR_TOKEN) as as_operator:
            listed = (await as_operator.get("/api/sessions")).json()
        assert [s["id"] for s in listed] == [local]  # not alice's
    assert mine != local
