"""Sub-agents on the page: a delegate call's card opens the sub-agent's session, whose
page links back to its parent; the session list shows the sub-agent below its parent."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, eventually, let_go

from browser.pages import loaded, new_session, open_session, screenshot, send, signed_in
from duragent.domain.subagents import DELEGATE_TOOL

pytestmark = pytest.mark.browser


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "match": "^Child",
                    "reply": [{"tool_use": {"name": "bash", "input": {"command": UNTIL_GO}}}],
                },
                {"reply": [{"text": "child answer"}]},
            ]
        }
    }
)
async def test_a_delegate_card_opens_the_sub_agent_and_it_links_back(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        parent = await new_session(http, name="lead")
        delegate = {"name": DELEGATE_TOOL, "input": {"prompt": "Child: wait", "name": "helper"}}
        stack.model.add_steps(
            parent,
            [{"reply": [{"tool_use": delegate}]}, {"reply": [{"text": "parent answer"}]}],
            replace=True,
        )
        page = await signed_in(browser_context, api)
        await open_session(page, parent)
        await send(page, "hand it over")
        link = page.locator(".tool .subagent-link")
        await expect(link).to_contain_text("helper")  # while the sub-agent runs
        (child,) = await stack.client.sessions.children(parent)
        await expect(
            page.locator(f'#session-list li.subagent[data-id="{child.id}"]')
        ).to_be_visible()
        await screenshot(page, "subagent-running")
        await link.click()
        await loaded(page, child.id)
        assert page.url.endswith(f"#/s/{child.id}")
        back = page.locator(".subagent-parent-link")
        await expect(back).to_have_text("lead")
        let_go(stack, child.id)
        await expect(page.locator(".msg.assistant").last).to_contain_text("child answer")
        await back.click()
        await loaded(page, parent)
        await expect(page.locator(".msg.assistant").last).to_contain_text("parent answer")
        await eventually(lambda: stack.client.sync.runs.list(parent)[0].status == "completed")
        # After a reload the stored result still links to the sub-agent.
        await page.reload()
        await loaded(page, parent)
        await expect(page.locator(".tool .subagent-link")).to_have_attribute(
            "href", f"#/s/{child.id}"
        )
