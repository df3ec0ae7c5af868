"""The page's layout where a person met its faults, at the width they met them at: a phone
(390x844, touch), a tablet (768x1024, touch) and a desktop (1400x900).

On a phone a queued message shows whole, every target is big enough for a finger and far
enough from the next, and the conversation keeps most of the screen (the session's header
folds to one row). On a tablet the activity is named once. On a desktop the side panel says
what to do first when no session is open, another user's link says only that it is not
theirs, and a long session name stays on one row of the header.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call
from playwright.async_api import expect
from support import ApiServer, Stack, eventually, run_finished

from browser.pages import base_url, chips, new_session, open_session, screenshot, send, signed_in

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
TABLET = {"width": 768, "height": 1024}

QUEUED = (
    "Also count the PDF files in the docs folder and say which three are the largest, "
    "with their sizes in megabytes"
)
LONG_NAME = (
    "Migrate the billing service from the old cron jobs to the new event pipeline, "
    "keeping every invoice number stable across the switch"
)


def touch_screen(browser: Any, screen: dict[str, int]) -> Any:
    """A context like a phone's or a tablet's browser: that wide, with touch."""
    return browser.new_context(viewport=screen, is_mobile=True, has_touch=True)


TARGETS = """() => {
    // What a finger may press: each at least 44x44 px (WCAG 2.5.5) and 8 px from the next.
    // A radio button or a checkbox is pressed through its label (the label is its target);
    // a link inside a message's text is exempt (WCAG's inline exception).
    const SELECTOR = [
        "button", "a[href]", "input:not([type=hidden])", "select", "textarea", "summary",
        "[role=button]",
    ].join(", ");
    const clipping = (node) => {
        const style = getComputedStyle(node);
        return style.overflowX !== "visible" || style.overflowY !== "visible";
    };
    const scrollerOf = (node) => {
        for (let up = node.parentElement; up; up = up.parentElement) if (clipping(up)) return up;
        return null;
    };
    const meet = (a, b) => {
        const box = { left: Math.max(a.left, b.left), top: Math.max(a.top, b.top),
            right: Math.min(a.right, b.right), bottom: Math.min(a.bottom, b.bottom) };
        return box.right > box.left && box.bottom > box.top ? box : null;
    };
    // The part of a box its clipping ancestors and the screen leave in sight.
    const inSight = (node, box) => {
        let seen = { left: 0, top: 0, right: innerWidth, bottom: innerHeight };
        for (let up = node.parentElement; up && seen; up = up.parentElement) {
            if (clipping(up)) seen = meet(seen, up.getBoundingClientRect());
        }
        return seen && meet(seen, box);
    };
    const targets = [];
    for (const node of document.querySelectorAll(SELECTOR)) {
        if (node.tagName === "A" && node.closest(".text")) continue;
        const label = (node.type === "radio" || node.type === "checkbox") && node.closest("label");
        const target = label || node;
        const box = target.getBoundingClientRect();
        // (A closed <details> keeps its content laid out, out of sight: not a target.)
        const shown = target.checkVisibility({ visibilityProperty: true });
        if (!box.width || !box.height || !shown) continue;
        const text = (target.innerText || target.value || target.ariaLabel || "").trim();
        targets.push({
            node: target, box, seen: inSight(target, box), scroller: scrollerOf(target),
            name: `${target.tagName.toLowerCase()}.${target.className} "${text.slice(0, 24)}"`,
        });
    }
    const small = targets
        .filter((t) => t.box.width < 43.99 || t.box.height < 43.99)
        .map((t) => `${t.name} ${t.box.width.toFixed(1)}x${t.box.height.toFixed(1)}`);
    const close = [];
    for (let i = 0; i < targets.length; i++) {
        for (let j = i + 1; j < targets.length; j++) {
            const a = targets[i], b = targets[j];
            if (a.node.contains(b.node) || b.node.contains(a.node)) continue;
            // In one scrolling box their places are fixed to each other, in sight or not;
            // across boxes only what is in sight can be near.
            const [p, q] = a.scroller === b.scroller ? [a.box, b.box] : [a.seen, b.seen];
            if (!p || !q) continue;
            const dx = Math.max(0, p.left - q.right, q.left - p.right);
            const dy = Math.max(0, p.top - q.bottom, q.top - p.bottom);
            const gap = Math.hypot(dx, dy);
            if (gap < 7.99) close.push(`${a.name} / ${b.name}: ${gap.toFixed(1)} px apart`);
        }
    }
    return { count: targets.length, small, close };
}"""


async def finger_faults(page: Any, screen: str) -> list[str]:
    """Every target of the screen shown that is too small for a finger or too near another."""
    found = await page.evaluate(TARGETS)
    assert found["count"] > 0, f"{screen}: no target measured"
    return [f"{screen}: {fault}" for fault in [*found["small"], *found["close"]]]


async def queue_for_the_next_run(page: Any, text: str) -> None:
    """Type `text` and send it with the menu's "Queue for the next run": it waits for the
    next prompt and starts nothing."""
    await page.locator("#composer .box").fill(text)
    await page.locator("#composer .send-menu summary").click()
    await page.locator('#composer .send-option[data-mode="queue"]').click()


async def box(page: Any, selector: str) -> dict[str, float]:
    found = await page.locator(selector).bounding_box()
    assert found is not None, f"{selector} is not shown"
    return dict(found)


# Item 11 ------------------------------------------------------------------------------


@pytest.mark.script({"conversations": {"*": [{"wait_for": "go", "reply": [{"text": "started"}]}]}})
async def test_a_phone_shows_a_queued_message_whole(
    stack: Stack, api: ApiServer, browser: Any
) -> None:
    context = await touch_screen(browser, PHONE)
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http, "queue on a phone")
            page = await signed_in(context, api)
            await open_session(page, session)
            await send(page, "start the audit")
            await expect(page.locator("#run-header .stop")).to_be_enabled()
            await queue_for_the_next_run(page, QUEUED)
            chip = chips(page)
            await expect(chip).to_have_count(1)
            text = chip.locator(".chip-text")
            await expect(text).to_have_text(QUEUED)
            # Whole: nothing of it cut off or hidden, and all of it on the screen.
            cut = await text.evaluate(
                """node => ({
                    wide: node.scrollWidth - node.clientWidth,
                    tall: node.scrollHeight - node.clientHeight,
                })"""
            )
            assert cut == {"wide": 0, "tall": 0}, cut
            shown = await box(page, "#composer .chip .chip-text")
            assert shown["x"] >= 0 and shown["x"] + shown["width"] <= PHONE["width"], shown
            await screenshot(page, "third-pass-phone-queued")
            stack.model.release("go")
            await eventually(lambda: run_finished(stack, session))
    finally:
        await context.close()


# Item 12 ------------------------------------------------------------------------------

CALL_ASK = {
    "tool_use": {
        "id": "call_ask",
        "name": "ask_user",
        "input": {
            "question": "Which database should the new service use?",
            "choices": ["SQLite", "PostgreSQL"],
        },
    }
}
CONTENT = {
    "conversations": {
        "*": [
            {
                "reply": [
                    {"text": "I will write it first."},
                    bash_call("echo ran > out.txt", "call_write"),
                ]
            },
            {"reply": [CALL_ASK]},
            {"reply": [{"text": "Done: written, and set up as you chose."}]},
        ]
    }
}


@pytest.mark.script(CONTENT)
async def test_every_target_on_a_phone_fits_a_finger(
    stack: Stack, api: ApiServer, browser: Any
) -> None:
    """A session with a tool card, a queued chip, an approval card, a question card, the
    budget editor, a schedule and a tree: on each screen every target is at least 44x44 px
    and 8 px from the next."""
    context = await touch_screen(browser, PHONE)
    schedule_id = None
    faults: list[str] = []
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http, "fingers")
            await stack.client.config.set_active_tools(session, ["bash", "ask_user"])
            put = await http.put(
                f"/api/sessions/{session}/approval-policy",
                json={"policy": ASK_BASH.model_dump(mode="json")},
            )
            assert put.status_code == 200, put.text
            page = await signed_in(context, api)
            await open_session(page, session)
            await send(page, "write it")
            approval = page.locator('.tool[data-call-id="call_write"] .approval')
            await expect(approval).to_be_visible()
            await queue_for_the_next_run(page, QUEUED)
            await expect(chips(page)).to_have_count(1)
            faults += await finger_faults(page, "approval card and queued chip")
            await screenshot(page, "third-pass-phone-approval")

            await approval.locator(".approval-approve").click()
            question = page.locator('.tool[data-call-id="call_ask"] .question')
            await expect(question).to_be_visible()
            written = page.locator('.tool[data-call-id="call_write"]')
            await expect(written).to_have_attribute("data-state", "done")
            await expect(written.locator(".tool-args summary")).to_be_visible()
            faults += await finger_faults(page, "question card and tool card")
            await screenshot(page, "third-pass-phone-question")

            # The header's figures and buttons (unfolded), and the budget editor they open.
            toggle = page.locator("#head-toggle")
            if await toggle.is_visible():
                await toggle.click()
            await page.locator("#run-header .edit-budget").click()
            await expect(page.locator("#budget-editor .budget-input").first).to_be_visible()
            faults += await finger_faults(page, "budget editor")
            await screenshot(page, "third-pass-phone-budget-editor")
            await page.locator("#budget-editor .budget-close").click()
            if await toggle.is_visible():
                await toggle.click()

            await question.locator("button.question-choice", has_text="SQLite").click()
            await eventually(lambda: run_finished(stack, session))
            await expect(page.locator("#composer .send-queued")).to_be_visible()
            faults += await finger_faults(page, "idle with a queued chip")

            await page.click('#panes button[data-pane="activity"]')
            await expect(page.locator("#activity .event").first).to_be_visible()
            faults += await finger_faults(page, "activity")
            await page.click('.tabs button[data-tab="tree"]')
            await expect(page.locator("#tree .node").first).to_be_visible()
            faults += await finger_faults(page, "tree")
            await screenshot(page, "third-pass-phone-tree")
            await page.click('.tabs button[data-tab="schedules"]')
            panel = page.locator("#schedules")
            await panel.locator(".schedule-prompt").fill("check the nightly build")
            await panel.locator(".schedule-timing").fill("1h")
            await panel.locator(".schedule-form button[type=submit]").click()
            await expect(panel.locator(".schedule")).to_have_count(1)
            schedule_id = await panel.locator(".schedule").get_attribute("data-id")
            faults += await finger_faults(page, "schedules")
            await screenshot(page, "third-pass-phone-schedules")

            await page.click('#panes button[data-pane="sessions"]')
            await expect(page.locator("#session-list li")).to_have_count(1)
            faults += await finger_faults(page, "sessions")
            assert not faults, "\n".join(faults)
            await http.delete(f"/api/schedules/{schedule_id}")
            schedule_id = None
    finally:
        await context.close()
        if schedule_id is not None:
            with contextlib.suppress(Exception):
                await stack.client.schedules.delete(schedule_id)


# Item 13 ------------------------------------------------------------------------------


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "All three files are tidy."}]}]}})
async def test_a_phone_gives_the_conversation_most_of_the_screen(
    stack: Stack, api: ApiServer, browser: Any
) -> None:
    context = await touch_screen(browser, PHONE)
    try:
        async with stack.worker(), api.client() as http:
            session = await new_session(http, "tidy the config files")
            page = await signed_in(context, api)
            await open_session(page, session)
            await send(page, "tidy them")
            await expect(page.locator(".msg.assistant").last).to_contain_text("tidy")
            await eventually(lambda: run_finished(stack, session))
            await expect(page.locator("#run-header .phase")).to_have_text("idle")
            await expect(page.locator("#run-header .tokens")).not_to_be_empty()
            conversation = await box(page, "#conversation")
            assert conversation["height"] >= 0.6 * PHONE["height"], conversation
            # Folded: the name and the phase on one row; the rest is a tap away.
            await expect(page.locator("#run-header .name")).to_be_visible()
            await expect(page.locator("#run-header .phase")).to_be_visible()
            for hidden in (".tokens", ".rename", ".edit-budget", ".compact"):
                await expect(page.locator(f"#run-header {hidden}")).to_be_hidden()
            await screenshot(page, "third-pass-phone-conversation")
            toggle = page.locator("#head-toggle")
            await expect(toggle).to_have_attribute("aria-expanded", "false")
            await toggle.tap()
            await expect(toggle).to_have_attribute("aria-expanded", "true")
            for shown in (".tokens", ".rename", ".edit-budget", ".compact"):
                await expect(page.locator(f"#run-header {shown}")).to_be_visible()
            await screenshot(page, "third-pass-phone-header-open")
            await toggle.tap()
            await expect(page.locator("#run-header .compact")).to_be_hidden()
    finally:
        await context.close()


# Item 15 ------------------------------------------------------------------------------


async def test_a_tablet_names_the_activity_once(api: ApiServer, browser: Any) -> None:
    context = await touch_screen(browser, TABLET)
    try:
        async with api.client() as http:
            session = await new_session(http, "on a tablet")
        page = await signed_in(context, api)
        await open_session(page, session)
        await page.click('#panes button[data-pane="activity"]')
        await expect(page.locator("#activity")).to_be_visible()
        named = await page.evaluate(
            """() => [...document.querySelectorAll("button, [role=tab]")]
                .filter((node) => node.getClientRects().length)
                .map((node) => node.innerText.trim())"""
        )
        assert named.count("Activity") == 1, named
        await screenshot(page, "third-pass-tablet-activity")
    finally:
        await context.close()


async def test_with_no_session_open_the_side_panel_says_what_to_do_first(
    api: ApiServer, browser_context: Any
) -> None:
    page = await signed_in(browser_context, api)
    await expect(page.locator("#no-session")).to_be_visible()
    side = page.locator(".side")
    await expect(side).to_contain_text("New session")
    await expect(side).to_contain_text("Enter")
    # Nothing of a session's panels: no session is open.
    await expect(page.locator(".side .tabs")).to_be_hidden()
    await screenshot(page, "third-pass-desktop-no-session")


async def test_another_users_link_says_it_is_not_theirs_and_nothing_else(
    api: ApiServer, browser_context: Any
) -> None:
    async with api.client(ApiServer.OTHER_TOKEN) as bob:
        bobs = await new_session(bob, "bob's plans")
    page = await signed_in(browser_context, api)  # alice
    await page.goto(f"{base_url(api)}/#/s/{bobs}")
    await expect(page.locator("#not-found")).to_contain_text("does not exist (or is not yours)")
    main = await page.locator(".main").inner_text()
    side = await page.locator(".side").inner_text()
    assert main.strip() == (await page.locator("#not-found").inner_text()).strip(), main
    assert side.strip() == "", side
    await screenshot(page, "third-pass-desktop-not-found")


@pytest.mark.script({"conversations": {"*": [{"reply": [{"text": "Planned."}]}]}})
async def test_a_long_session_name_keeps_the_header_on_one_row(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        session = await new_session(http, LONG_NAME)
        page = await signed_in(browser_context, api)
        await open_session(page, session)
        await send(page, "plan it")
        await expect(page.locator(".msg.assistant").last).to_contain_text("Planned.")
        await eventually(lambda: run_finished(stack, session))
        await expect(page.locator("#run-header .tokens")).not_to_be_empty()
        name = page.locator("#run-header .name")
        await expect(name).to_have_text(LONG_NAME)
        await expect(name).to_have_attribute("title", LONG_NAME)  # the whole name on hover
        parts = [
            await box(page, f"#run-header .run-header > {part}")
            for part in (".title", ".figures", ".actions")
        ]
        # One row: every part begins above the end of every other.
        assert max(p["y"] for p in parts) < min(p["y"] + p["height"] for p in parts), parts
        size = await name.evaluate("node => parseFloat(getComputedStyle(node).fontSize)")
        assert (await box(page, "#run-header .name"))["height"] < 2 * size  # one line
        assert await name.evaluate("node => node.scrollWidth > node.clientWidth")  # ellipsis
        await screenshot(page, "third-pass-desktop-long-name")
        # A tap (or click) on the name shows it whole.
        await name.click()
        await page.wait_for_function(
            """size => {
                const name = document.querySelector("#run-header .name");
                const whole = name.scrollWidth <= name.clientWidth;
                return whole && name.getBoundingClientRect().height > 2 * size;
            }""",
            arg=size,
        )
        await screenshot(page, "third-pass-desktop-long-name-open")
