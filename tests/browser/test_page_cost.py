"""What a run cost, on the page: the run header shows the run's cost, the session's and
the cache hit rate; each assistant message its model call's cost."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from support import ApiServer, Stack, eventually, run_finished

from browser.pages import new_session, open_session, screenshot, send, signed_in
from duragent.activities.prices import bundled_prices
from duragent.domain.cost import cache_hit_rate, cost_text, rate_text, usage_cost

pytestmark = pytest.mark.browser

USAGE = {
    "input_tokens": 1000,
    "output_tokens": 300,
    "cache_read_input_tokens": 9000,
    "cache_creation_input_tokens": 0,
}


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "Priced."}], "usage": USAGE}]}})
async def test_the_header_shows_what_the_run_cost(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "talk")
        await eventually(lambda: run_finished(stack, session))
        [run] = await stack.client.runs.list(session)
        price = bundled_prices().price_of(stack.settings.model)
        assert price is not None
        spent = cost_text(usage_cost(run.usage, price))
        rate = rate_text(cache_hit_rate(run.usage))
        await expect(page.locator(".run-header .cost")).to_have_text(
            f"run {spent} · session {spent} · {rate}"
        )
        who = page.locator(".msg.assistant:not([data-live]) .who")
        # The offline model answered in the model's name: the message names it, as the header.
        assert stack.settings.offline
        await expect(who).to_have_attribute("data-cost", f"{spent} · offline model (scripted)")
        await screenshot(page, "run-cost")
