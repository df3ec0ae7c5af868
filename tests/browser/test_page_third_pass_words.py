"""The page's words, walked on a desktop, a tablet and a phone: the run header's figures
through a run's first turn, what the Schedules form accepts, every label in the
browser's language (Chinese), the model and the connection said truly, and denying an
approval with a reason in one tap on a phone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call, calls_then_text, tool_results_sent
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, eventually, let_go, run_finished

from browser.pages import new_session, open_session, screenshot, send, signed_in

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1400, "height": 900}
TABLET = {"width": 768, "height": 1024}
PHONE = {"width": 390, "height": 844}
SCREENS = {"desktop": DESKTOP, "tablet": TABLET, "phone": PHONE}
EVERY_SCREEN = pytest.mark.parametrize("screen", list(SCREENS))


def a_context(browser: Any, screen: str, locale: str = "en-GB") -> Any:
    """A browser of that screen: a phone and a tablet are touch screens."""
    size = SCREENS[screen]
    touch = screen != "desktop"
    return browser.new_context(viewport=size, is_mobile=touch, has_touch=touch, locale=locale)


async def show_pane(page: Any, screen: str, pane: str) -> None:
    """On a narrow screen, the pane switcher's `pane` (the desktop shows them all)."""
    if screen != "desktop":
        await page.click(f'#panes button[data-pane="{pane}"]')


async def unfold_header(page: Any) -> None:
    """A phone folds the header's figures and buttons away until its toggle is pressed."""
    if await page.locator("#head-toggle").is_visible():
        await page.click("#head-toggle")


async def show_schedules(page: Any, screen: str) -> Any:
    await show_pane(page, screen, "activity")
    await page.click('.tabs button[data-tab="schedules"]')
    panel = page.locator("#schedules")
    await expect(panel).to_be_visible()
    return panel


# 5. The header's figures through a run's first turn --------------------------------------

FIRST_TURN_USAGE = {"input_tokens": 1200, "output_tokens": 34}
HELD_FIRST_REPLY = {
    "conversations": {
        "*": [
            {
                "wait_for": "go",
                "usage": FIRST_TURN_USAGE,
                "reply": [{"tool_use": {"name": "bash", "input": {"command": UNTIL_GO}}}],
            },
            {"reply": [{"text": "built"}]},
        ]
    }
}
NO_FIGURES_YET = "tokens and cost come with the model's first reply"
COST_AT_TURN_END = "cost counted when this turn ends"


@EVERY_SCREEN
@pytest.mark.script(HELD_FIRST_REPLY)
async def test_the_header_says_what_is_known_through_the_first_turn(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    context = await a_context(browser, screen)
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http)
            page = await signed_in(context, api)
            await open_session(page, session)
            header = page.locator("#run-header")
            figures = header.locator(".figures")
            await unfold_header(page)
            await send(page, "build it")
            await expect(header.locator(".phase")).to_have_text("working")
            # The model has not answered yet: the header says when figures come, not zeros.
            await expect(header.locator(".tokens")).to_have_text(NO_FIGURES_YET)
            await expect(header.locator(".cost")).to_have_text("")
            shown = await figures.inner_text()
            for zero in ("0 tokens", "$0.0000", "no prompt tokens"):
                assert zero not in shown, shown
            await screenshot(page, f"third-pass-5-before-reply-{screen}")
            # Its first reply came (a tool call now running, the turn not saved): its tokens
            # show at once, and the cost says when it is counted.
            stack.model.release("go")
            await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
            await expect(header.locator(".tokens")).to_have_text("1,234 tokens")
            await expect(header.locator(".cost")).to_have_text(COST_AT_TURN_END)
            await screenshot(page, f"third-pass-5-reply-streamed-{screen}")
            let_go(stack, session)
            await eventually(lambda: run_finished(stack, session))
            await expect(header.locator(".phase")).to_have_text("idle")
            await expect(header.locator(".cost")).to_contain_text("run $")
            await expect(header.locator(".cost")).not_to_contain_text("no prompt tokens")
            await screenshot(page, f"third-pass-5-run-ended-{screen}")
    finally:
        await context.close()


# 8. What the Schedules form accepts, said before sending --------------------------------


@pytest.mark.parametrize("screen", ["desktop", "phone"])
@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "ok"}]}]}})
async def test_the_schedule_form_says_what_it_accepts_as_you_type(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    context = await a_context(browser, screen)
    try:
        async with api.client() as http:
            session = await new_session(http)
            page = await signed_in(context, api)
            await open_session(page, session)
            panel = await show_schedules(page, screen)
            help_text = panel.locator(".schedule-help")
            for form in ("1h", "30m", "90s", "0 9 * * 1-5", "@daily"):
                await expect(help_text).to_contain_text(form)
            timing = panel.locator(".schedule-timing")
            check = panel.locator(".schedule-check")
            await panel.locator(".schedule-prompt").fill("tick")
            await timing.press_sequentially("every hour")
            await expect(check).to_contain_text("“every hour”")
            await expect(check).to_contain_text("1h")
            await expect(check).to_contain_text("0 * * * *")
            await expect(timing).to_have_attribute("aria-invalid", "true")
            await screenshot(page, f"third-pass-8-check-{screen}")
            # Sent anyway: refused on the page, in the same words, nothing sent.
            await panel.locator(".schedule-form button[type=submit]").click()
            await expect(check).to_contain_text("“every hour”")
            assert "Temporal" not in await panel.inner_text()
            assert (await http.get(f"/api/sessions/{session}/schedules")).json() == []
            # A cron expression with a bad field is named as you type.
            await timing.fill("")
            await timing.press_sequentially("0 25 * * *")
            await expect(check).to_contain_text("hour")
            await expect(check).to_contain_text("0\N{EN DASH}23")
            # Good forms clear the check and are taken.
            await timing.fill("")
            await timing.press_sequentially("@hourly")
            await expect(check).to_have_text("")
            await expect(timing).not_to_have_attribute("aria-invalid", "true")
            await panel.locator(".schedule-form button[type=submit]").click()
            await expect(panel.locator(".schedule")).to_have_count(1)
            await expect(panel.locator(".schedule .schedule-when")).to_contain_text("@hourly")
            await screenshot(page, f"third-pass-8-taken-{screen}")
            # The server's own refusal is in plain words too (another client, say).
            refused = await http.post(
                f"/api/sessions/{session}/schedules", json={"prompt": "x", "cron": ["every hour"]}
            )
            assert refused.status_code == 422, refused.text
            said = refused.json()["detail"]
            assert "CronString" not in said and "Temporal" not in said, said
            assert "minute hour day-of-month month day-of-week" in said, said
            assert "0 * * * *" in said and "1h" in said, said
            for made in (await http.get(f"/api/sessions/{session}/schedules")).json():
                await http.delete(f"/api/schedules/{made['id']}")
    finally:
        await context.close()


# 9. Every word in the browser's language ----------------------------------------------

ALLOWED_LATIN = {"token", "worker", "cron", "UTC", "US", "IANA", "API", "bash", "Enter", "Shift"}
"""Words a Chinese page may show in Latin letters: names and code, not English."""
LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")

SHOWN_WORDS = """(selectors) => {
    const found = [];
    const shown = (node) =>
        node.getClientRects().length && getComputedStyle(node).visibility !== "hidden";
    for (const selector of selectors) {
        for (const root of document.querySelectorAll(selector)) {
            if (!shown(root)) continue;
            const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const parent = node.parentElement;
                if (!parent || parent.closest("code, pre") || !shown(parent)) continue;
                const text = node.textContent.trim();
                if (text) found.push([selector, text]);
            }
            for (const node of root.querySelectorAll("[placeholder], [title], [aria-label]")) {
                if (!shown(node)) continue;
                for (const name of ["placeholder", "title", "aria-label"]) {
                    const text = (node.getAttribute(name) || "").trim();
                    if (text) found.push([`${selector} @${name}`, text]);
                }
            }
        }
    }
    return found;
}"""


async def english_on(
    page: Any, *selectors: str, names: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """The shown texts (and placeholders, tooltips, labels) under `selectors` with a word
    in Latin letters that is not a name or code (`names`: more names, such as the model's)."""
    found = await page.evaluate(SHOWN_WORDS, list(selectors))
    english = []
    for where, text in found:
        for name in names:
            text = text.replace(name, "")
        if any(word not in ALLOWED_LATIN for word in LATIN_WORD.findall(text)):
            english.append((where, text))
    return english


@pytest.mark.parametrize("screen", ["desktop", "phone"])
@pytest.mark.script(calls_then_text([bash_call("echo ran > out.txt", "call_write")], "好了。"))
async def test_a_chinese_browser_reads_the_approval_card_budget_header_and_schedules_in_chinese(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    context = await a_context(browser, screen, locale="zh-CN")
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http, "写文件")
            put = await http.put(
                f"/api/sessions/{session}/approval-policy",
                json={"policy": ASK_BASH.model_dump(mode="json")},
            )
            assert put.status_code == 200, put.text
            put = await http.put(
                f"/api/sessions/{session}/budget",
                json={"budget": {"max_turns": 1, "max_cost_usd": 5, "on_exceed": "ask"}},
            )
            assert put.status_code == 200, put.text
            page = await signed_in(context, api)
            await open_session(page, session)
            await send(page, "写一个文件")
            card = page.locator('.tool[data-call-id="call_write"] .approval')
            await expect(card).to_be_visible()
            await expect(page.locator("#run-header .phase")).to_have_text("等待批准")
            await unfold_header(page)
            await expect(page.locator("#run-header .cost")).to_be_visible()
            model = (stack.settings.model,)
            assert await english_on(page, ".approval", "#run-header", names=model) == []
            await screenshot(page, f"third-pass-9-approval-{screen}")
            # The session budget's editor, and its own refusal of a box that holds no number.
            await page.click("#run-header .edit-budget")
            editor = page.locator("#budget-editor .budget-editor")
            await expect(editor.locator(".budget-save")).to_be_visible()
            await editor.locator('.budget-input[data-limit="max_tokens"]').fill("很多")
            await editor.locator(".budget-save").click()
            await expect(editor.locator(".budget-error")).to_be_visible()
            assert await english_on(page, "#budget-editor") == []
            await screenshot(page, f"third-pass-9-budget-editor-{screen}")
            await editor.locator(".budget-close").click()
            # Approved, the turn ends at the budget's one turn: the run waits for a raise.
            await card.locator("button.approval-approve").click()
            budget_card = page.locator("#budget .budget-card")
            await expect(budget_card).to_be_visible()
            await expect(page.locator("#run-header .phase")).to_have_text("等待提高预算")
            await expect(page.locator("#run-header .cost")).to_contain_text("本次运行 $")
            assert await english_on(page, "#budget", "#run-header", names=model) == []
            await screenshot(page, f"third-pass-9-budget-card-{screen}")
            # The Schedules tab: the form, its check, and a schedule made there.
            panel = await show_schedules(page, screen)
            await panel.locator(".schedule-prompt").fill("每小时检查一次")
            await panel.locator(".schedule-timing").press_sequentially("every hour")
            await expect(panel.locator(".schedule-check")).to_contain_text("1h")
            assert await english_on(page, "#schedules") == []
            await screenshot(page, f"third-pass-9-schedule-check-{screen}")
            await panel.locator(".schedule-timing").fill("1h")
            await panel.locator(".schedule-form button[type=submit]").click()
            await expect(panel.locator(".schedule")).to_have_count(1)
            assert await english_on(page, "#schedules") == []
            await screenshot(page, f"third-pass-9-schedules-{screen}")
            for made in (await http.get(f"/api/sessions/{session}/schedules")).json():
                await http.delete(f"/api/schedules/{made['id']}")
            await show_pane(page, screen, "conversation")
            await page.click("#run-header .stop")
            await eventually(lambda: run_finished(stack, session))
    finally:
        await context.close()


# 10. The model and the connection, said truly --------------------------------------------


@EVERY_SCREEN
@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "hello"}]}] * 2}})
async def test_the_model_and_the_connection_are_said_truly(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    context = await a_context(browser, screen)
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http)
            page = await signed_in(context, api)
            await open_session(page, session)
            await unfold_header(page)
            await send(page, "hi")
            await eventually(lambda: run_finished(stack, session))
            # The header and each message name the same model: the offline one.
            model = page.locator("#run-header .model")
            await expect(model).to_have_text("offline model (scripted)")
            who = page.locator(".msg.assistant:not([data-live]) .who")
            await expect(who).to_have_count(1)
            await expect(who).to_have_attribute(
                "data-cost", re.compile(r"· offline model \(scripted\)$")
            )
            assert stack.settings.model not in (await who.get_attribute("data-cost") or "")
            await screenshot(page, f"third-pass-10-model-{screen}")
            # The browser goes offline: the badge says so, and a send fails in words.
            badge = page.locator("#connection")
            await expect(badge).to_have_text("live")
            await context.set_offline(True)
            await expect(badge).to_have_text("offline")
            await send(page, "are you there?")
            error = page.locator("#composer .composer-error")
            await expect(error).to_contain_text("cannot reach the server")
            await screenshot(page, f"third-pass-10-offline-{screen}")
            # Back online: live again, and the error that no longer holds is gone.
            await context.set_offline(False)
            await expect(badge).to_have_text("live")
            await expect(error).to_be_empty()
            await screenshot(page, f"third-pass-10-back-online-{screen}")
            await page.locator("#composer .box").press("Enter")
            await expect(page.locator(".msg.assistant")).to_have_count(2)
            await eventually(lambda: run_finished(stack, session))
    finally:
        await context.close()


# 14. Deny with a reason on a phone ------------------------------------------------------


LONG_ANSWER = "\n\n".join(f"Line {n} of a long answer." for n in range(1, 41))
A_LONG_ANSWER_THEN_A_CALL = {
    "conversations": {
        "*": [
            {"reply": [{"text": LONG_ANSWER}]},
            {"reply": [bash_call("echo ran > out.txt", "call_write")]},
            {"reply": [{"text": "Understood."}]},
        ]
    }
}


@pytest.mark.script(A_LONG_ANSWER_THEN_A_CALL)
async def test_a_phone_denies_with_a_reason_in_one_tap(
    stack: Stack, api: ApiServer, browser: Any
) -> None:
    context = await a_context(browser, "phone")
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http)
            put = await http.put(
                f"/api/sessions/{session}/approval-policy",
                json={"policy": ASK_BASH.model_dump(mode="json")},
            )
            assert put.status_code == 200, put.text
            page = await signed_in(context, api)
            await open_session(page, session)
            # A conversation longer than the screen: the card comes at its foot.
            await send(page, "tell me a lot")
            await expect(page.locator(".msg.assistant")).to_contain_text("Line 40")
            await eventually(lambda: run_finished(stack, session))
            await send(page, "write it")
            card = page.locator('.tool[data-call-id="call_write"] .approval')
            await expect(card).to_be_visible()
            reason = card.locator(".approval-reason")
            deny = card.locator("button.approval-deny")
            await expect(reason).to_be_visible()
            await reason.tap()
            await reason.fill("not today")
            # The box and its Deny are in sight, whole, above the message box.
            composer = await page.locator("#composer").bounding_box()
            conversation = await page.locator("#conversation").bounding_box()
            assert composer and conversation
            for part in (reason, deny):
                seen = await part.bounding_box()
                assert seen, part
                assert seen["y"] >= conversation["y"] - 1, (seen, conversation)
                assert seen["y"] + seen["height"] <= composer["y"] + 1, (seen, composer)
            await screenshot(page, "third-pass-14-reason-phone")
            await deny.tap()
            await expect(card).to_have_count(0)
            await eventually(lambda: run_finished(stack, session))
            [sent] = tool_results_sent(stack, session)
            assert sent["is_error"] is True and "Reason: not today" in str(sent["content"])
            await screenshot(page, "third-pass-14-denied-phone")
    finally:
        await context.close()
