# ruff: noqa: RUF001 (Chinese text and full-width punctuation are meant here)
"""The conversation and the activity, walked on a desktop, a tablet and a phone (the third
pass over the page): guidance leaves its trace as the model receives it, linked to the
call it interrupted whatever else the turn saved; a later Stop leaves that call
"interrupted"; a running call shows its newest output lines; a denied call reads as
denied, with its reason, not as a failure; Stop says it cancelled the queued message; the
activity counts in words ("1 entry", "2 entries"), in English and in Chinese."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from approval_support import ASK_BASH, bash_call, waiting_calls
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, eventually, let_go, run_finished

from browser.pages import chips, inner_texts, loaded, screenshot, send, session_page

pytestmark = pytest.mark.browser

SCREENS = {
    "desktop": {"width": 1400, "height": 900},
    "tablet": {"width": 768, "height": 1024},
    "phone": {"width": 390, "height": 844},
}
EVERY_SCREEN = pytest.mark.parametrize("screen", list(SCREENS))

UNTIL_GO2 = "while [ ! -f go2 ]; do sleep 0.05; done"
TESTS = "echo started; " + UNTIL_GO
GUIDANCE = "stop, use the staging db instead"
TESTS_CARD = '.tool[data-call-id="call_tests"]'


@asynccontextmanager
async def a_page(
    browser: Any, api: ApiServer, http: Any, screen: str, locale: str = "en-GB"
) -> AsyncIterator[tuple[Any, str]]:
    """A new session open in a browser of that screen (a phone and a tablet: touch)."""
    touch = screen != "desktop"
    context = await browser.new_context(
        viewport=SCREENS[screen], is_mobile=touch, has_touch=touch, locale=locale
    )
    try:
        yield await session_page(context, api, http, "third pass")
    finally:
        await context.close()


async def workspace_of(http: Any, session: str) -> Path:
    found = await http.get(f"/api/sessions/{session}")
    assert found.status_code == 200, found.text
    return Path(found.json()["session"]["workspace"])


async def show_activity(page: Any, screen: str) -> Any:
    """The activity: beside the conversation on a desktop, its own pane on a narrow screen."""
    if screen != "desktop":
        await page.click('#panes button[data-pane="activity"]')
    activity = page.locator("#activity")
    await expect(activity).to_be_visible()
    return activity


async def show_conversation(page: Any, screen: str) -> None:
    if screen != "desktop":
        await page.click('#panes button[data-pane="conversation"]')
    await expect(page.locator("#conversation")).to_be_visible()


async def guide(page: Any, text: str) -> None:
    """Type while the run is busy (a chip), then press the chip's Guide."""
    await send(page, text)
    await chips(page).locator("button.guide").click()


def reply(*parts: dict[str, Any], wait_for: str | None = None) -> dict[str, Any]:
    return {"reply": list(parts), **({"wait_for": wait_for} if wait_for else {})}


def script(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"conversations": {"*": list(steps)}}


async def the_trace_links_the_call(page: Any, command: str = "echo started") -> None:
    """The note where the model received the guidance names the call it interrupted, and
    the call's card links to it."""
    mark = page.locator("#conversation .guidance-mark")
    await expect(mark).to_have_count(1)
    await expect(mark).to_contain_text(GUIDANCE)
    await expect(mark).to_contain_text("interrupted the running")
    await expect(mark.locator(".guidance-where code")).to_contain_text(command)
    card = page.locator(TESTS_CARD)
    await expect(card).to_have_attribute("data-state", "interrupted")
    await expect(card.locator(".guidance-link")).to_contain_text("Interrupted by your guidance")


# 1. Guidance leaves its trace when the model receives it -----------------------------------

HELD_ANSWER = script(
    reply(bash_call(TESTS, "call_tests")),
    reply({"text": "switched to the staging db"}, wait_for="answer"),
)


@EVERY_SCREEN
@pytest.mark.script(HELD_ANSWER)
async def test_guidance_shows_where_the_model_received_it_at_once(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    """The model's next answer is held: the trace must show while it is, not a turn later."""
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, _),
    ):
        await send(page, "run the tests")
        await expect(page.locator(TESTS_CARD).locator(".tool-output")).to_contain_text("started")
        await guide(page, GUIDANCE)
        await the_trace_links_the_call(page)  # the model's answer is still held
        assert "switched" not in await page.locator("#conversation").inner_text()
        await screenshot(page, f"third-pass-guidance-at-once-{screen}")
        activity = await show_activity(page, screen)
        await expect(activity.locator(".event.runtime_guidance_injected")).to_contain_text(
            "; 1 running tool call interrupted"
        )
        await show_conversation(page, screen)
        stack.model.release("answer")
        await expect(page.locator(".msg.assistant").last).to_contain_text("switched")
        await the_trace_links_the_call(page)


# 2. The link holds whatever else the turn saved (steering, a pending write) ----------------


WAIT_SCRIPT = (
    "import pathlib, time\n"
    "print('started', flush=True)\n"
    "while not pathlib.Path('go').exists():\n"
    "    time.sleep(0.05)\n"
)
"""What `python3 wait.py` runs: a command "Always" can allow (no `;`, `&`, `|`...)."""


@EVERY_SCREEN
@pytest.mark.script(
    script(
        reply(bash_call("python3 wait.py", "call_tests")),
        reply({"text": "switched to the staging db"}, wait_for="answer"),
    )
)
async def test_guidance_links_the_call_it_interrupted_when_steering_and_a_policy_came_too(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    """The turn that guidance interrupts also saves a steering message sent meanwhile and the
    approval policy an "Always" changed: the guidance still names the call it stopped."""
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, session),
    ):
        policy = {"policy": ASK_BASH.model_dump(mode="json")}
        put = await http.put(f"/api/sessions/{session}/approval-policy", json=policy)
        assert put.status_code == 200, put.text
        workspace = await workspace_of(http, session)
        (workspace / "wait.py").write_text(WAIT_SCRIPT)
        await send(page, "run the tests")
        [call] = await waiting_calls(stack, session)
        always = await http.post(
            f"/api/sessions/{session}/approvals/{call}/approve", json={"always": True}
        )
        assert always.status_code == 200, always.text
        await expect(page.locator(TESTS_CARD).locator(".tool-output")).to_contain_text("started")
        steer = await http.post(f"/api/sessions/{session}/steer", json={"text": "mind the logs"})
        assert steer.status_code == 200, steer.text
        await guide(page, GUIDANCE)
        stack.model.release("answer")
        await expect(page.locator(".msg.assistant").last).to_contain_text("switched")
        await the_trace_links_the_call(page, "python3 wait.py")
        await screenshot(page, f"third-pass-guidance-link-{screen}")
        await eventually(lambda: run_finished(stack, session))
        await page.reload()
        await loaded(page, session)
        await the_trace_links_the_call(page, "python3 wait.py")


# 3. A later Stop leaves the call guidance interrupted as it ended --------------------------


@EVERY_SCREEN
@pytest.mark.script(
    script(
        reply(bash_call(TESTS, "call_tests")),
        reply(bash_call(f"echo staging; {UNTIL_GO2}", "call_staging")),
        reply({"text": "not reached"}),
    )
)
async def test_stop_leaves_the_call_guidance_interrupted_as_it_ended(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, session),
    ):
        await send(page, "run the tests")
        await expect(page.locator(TESTS_CARD).locator(".tool-output")).to_contain_text("started")
        await guide(page, GUIDANCE)
        staging = page.locator('.tool[data-call-id="call_staging"]')
        await expect(staging).to_have_attribute("data-state", "running")
        await page.click("#run-header .stop")
        await expect(staging).to_have_attribute("data-state", "aborted")
        await eventually(lambda: run_finished(stack, session))
        tests = page.locator(TESTS_CARD)
        await expect(tests).to_have_attribute("data-state", "interrupted")
        await expect(tests.locator(".tool-state")).to_have_text("interrupted")
        await screenshot(page, f"third-pass-stop-after-guidance-{screen}")
        await page.reload()
        await loaded(page, session)
        await expect(page.locator('.tool[data-call-id="call_staging"]')).to_have_attribute(
            "data-state", "aborted"
        )
        await expect(page.locator(TESTS_CARD)).to_have_attribute("data-state", "interrupted")


# 4. A running call shows its newest output lines --------------------------------------------

LINES = (
    "for i in $(seq 1 14); do echo line $i; done; "
    f"{UNTIL_GO}; for i in $(seq 15 20); do echo line $i; done; {UNTIL_GO2}"
)


async def line_shown(page: Any, text: str) -> bool:
    """Whether the output line `text` lies inside the visible box of its card's output."""
    return bool(
        await page.evaluate(
            """(text) => {
            const pre = document.querySelector('.tool[data-call-id="call_lines"] .tool-output');
            if (!pre) return false;
            const node = pre.firstChild;
            const at = node ? node.textContent.indexOf(text + "\\n") : -1;
            if (at < 0) return false;
            const range = document.createRange();
            range.setStart(node, at);
            range.setEnd(node, at + text.length);
            const line = range.getBoundingClientRect();
            const box = pre.getBoundingClientRect();
            return line.height > 0 && line.top >= box.top - 1 && line.bottom <= box.bottom + 1;
        }""",
            text,
        )
    )


@EVERY_SCREEN
@pytest.mark.script(script(reply(bash_call(LINES, "call_lines")), reply({"text": "all 20"})))
async def test_a_running_call_shows_its_newest_output_lines(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, session),
    ):
        await send(page, "count to twenty")
        card = page.locator('.tool[data-call-id="call_lines"]')
        await expect(card.locator(".tool-output")).to_contain_text("line 14")
        await expect(card).to_have_attribute("data-state", "running")
        await eventually(lambda: line_shown(page, "line 14"))
        assert not await line_shown(page, "line 1"), "the folded output shows its tail"
        await expect(card.locator("button.fold")).to_contain_text("Show all output (14 lines,")
        await screenshot(page, f"third-pass-output-tail-{screen}")
        let_go(stack, session)  # six lines more, while it still runs
        await expect(card.locator(".tool-output")).to_contain_text("line 20")
        await eventually(lambda: line_shown(page, "line 20"))
        # Opened, the whole output reads from its first line.
        await card.locator("button.fold").click()
        await expect(card.locator(".tool-output.open")).to_be_visible()
        workspace = await workspace_of(http, session)
        (workspace / "go2").touch()
        await expect(page.locator(".msg.assistant").last).to_contain_text("all 20")


# 6. A denied call reads as denied, with its reason ------------------------------------------


@EVERY_SCREEN
@pytest.mark.script(
    script(reply(bash_call("rm -rf build", "call_rm")), reply({"text": "Leaving build alone."}))
)
async def test_a_denied_call_reads_as_denied_with_its_reason(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, session),
    ):
        policy = {"policy": ASK_BASH.model_dump(mode="json")}
        put = await http.put(f"/api/sessions/{session}/approval-policy", json=policy)
        assert put.status_code == 200, put.text
        await send(page, "clean the build")
        [call] = await waiting_calls(stack, session)
        denied = await http.post(
            f"/api/sessions/{session}/approvals/{call}/deny", json={"reason": "not on a Friday"}
        )
        assert denied.status_code == 200, denied.text
        await expect(page.locator(".msg.assistant").last).to_contain_text("Leaving build alone")
        card = page.locator('.tool[data-call-id="call_rm"]')
        await expect(card).to_have_attribute("data-state", "denied")
        await expect(card.locator(".tool-state")).to_have_text("denied")
        await expect(card.locator(".tool-denied")).to_contain_text("Reason: not on a Friday")
        await expect(card.locator(".tool-time")).to_have_text("")
        await expect(card.locator(".tool-output")).to_have_count(0)
        # Neutral, as a call that did not run: not the red of a failure.
        colours = await card.evaluate(
            """(node) => [getComputedStyle(node).borderLeftColor,
                getComputedStyle(document.body).getPropertyValue("--bad").trim()]"""
        )
        assert colours[0] != "rgb(180, 35, 24)" and colours[1] == "#b42318", colours
        await screenshot(page, f"third-pass-denied-{screen}")
        activity = await show_activity(page, screen)
        rows = await inner_texts(page, "#activity .event .what")
        assert "Tool bash denied, not run: not on a Friday" in rows, rows
        assert not [row for row in rows if row.startswith("Tool bash started")], rows
        assert not [row for row in rows if "failed" in row], rows
        await expect(activity.locator(".event.approval_decided")).to_contain_text(
            "Tool call denied by"
        )
        await screenshot(page, f"third-pass-denied-activity-{screen}")


# 7. Stop says it cancelled the queued message ------------------------------------------------


@EVERY_SCREEN
@pytest.mark.script(script(reply(bash_call(TESTS, "call_tests")), reply({"text": "not reached"})))
async def test_stop_says_it_cancelled_the_queued_message(
    stack: Stack, api: ApiServer, browser: Any, screen: str
) -> None:
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen) as (page, _),
    ):
        await send(page, "run the tests")
        await expect(page.locator(TESTS_CARD).locator(".tool-output")).to_contain_text("started")
        await send(page, "then write the docs")
        chip = chips(page)
        await expect(chip).to_have_count(1)
        await page.click("#run-header .stop")
        await expect(chip).to_have_attribute("data-state", "cancelled")
        await screenshot(page, f"third-pass-stop-cancels-chip-{screen}")
        # The note is set with the state, and the chip leaves a few seconds later.
        assert await chip.locator(".chip-note").inner_text() == "cancelled by Stop"


# 10. The activity counts in words -------------------------------------------------------------

WORDS = {
    "en-GB": {
        "save": "Save point after turn 1: 1 entry stored",
        "end": "Run completed after 1 turn, ",
    },
    "zh-CN": {"save": "第 1 轮后的保存点：已存储 1 个条目", "end": "运行已完成：1 轮，"},
}


@pytest.mark.parametrize(
    ("screen", "locale"),
    [("desktop", "en-GB"), ("tablet", "en-GB"), ("phone", "en-GB"), ("desktop", "zh-CN")],
)
@pytest.mark.script(script(reply({"text": "Hello."})))
async def test_the_activity_counts_in_words(
    stack: Stack, api: ApiServer, browser: Any, screen: str, locale: str
) -> None:
    async with (
        stack.worker(),
        api.client() as http,
        a_page(browser, api, http, screen, locale) as (page, _),
    ):
        await send(page, "say hello")
        await expect(page.locator(".msg.assistant").last).to_contain_text("Hello.")
        activity = await show_activity(page, screen)
        words = WORDS[locale]
        await expect(activity.locator(".event.save_point .what").last).to_have_text(words["save"])
        await expect(activity.locator(".event.agent_end .what")).to_contain_text(words["end"])
        rows = await inner_texts(page, "#activity .event .what")
        assert not [row for row in rows if "(s)" in row or "1 entries" in row], rows
        await screenshot(page, f"third-pass-activity-words-{screen}-{locale}")
