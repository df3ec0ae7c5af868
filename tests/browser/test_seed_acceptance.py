"""The page's seven acceptance points (docs/SPEC.md) in the browser, clicking as a person does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect
from support import UNTIL_GO, ApiServer, Stack, bash_then_text, eventually, run_finished

from browser.pages import (
    base_url,
    inner_texts,
    loaded,
    new_session,
    open_session,
    screenshot,
    send,
    signed_in,
)
from duragent.activities.tools import process_group_alive

pytestmark = pytest.mark.browser

Json = dict[str, Any]


def user_texts(body: Json) -> str:
    return " ".join(
        block["text"]
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "text"
    )


async def queue_texts(http: Any, session: str) -> list[str]:
    return [i["text"] for i in (await http.get(f"/api/sessions/{session}/input-queue")).json()]


def two_runs_ended(stack: Stack, session: str) -> bool:
    runs = stack.client.sync.runs.list(session)
    return len(runs) == 2 and all(run.status != "running" for run in runs)


def chips(page: Any) -> Any:
    return page.locator("#composer .chip")


# A tool that runs until the test lets it finish (it creates the file `go`).
BUILD_UNTIL_GO = f"{UNTIL_GO}; echo built"
GATED = {
    "conversations": {
        "*": [
            {"wait_for": "go", "reply": [{"text": "first answer"}]},
            {"reply": [{"text": "second answer"}]},
        ]
    }
}


@pytest.mark.script(GATED)
async def test_1_two_sessions_in_two_tabs_never_mix(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a, b = await new_session(http, "A"), await new_session(http, "B")
        tab_a = await signed_in(browser_context, api, remember=True)
        await open_session(tab_a, a)
        tab_b = await browser_context.new_page()  # the same person, a second tab
        await tab_b.goto(f"{base_url(api)}/#/s/{b}")
        await loaded(tab_b, b)
        await send(tab_a, "task for A")
        await send(tab_b, "task for B")
        await eventually(lambda: all(len(stack.model.requests_for(s)) == 1 for s in (a, b)))
        await send(tab_a, "more for A")
        await send(tab_b, "more for B")
        await expect(chips(tab_a).locator(".chip-text")).to_have_text(["more for A"])
        await expect(chips(tab_b).locator(".chip-text")).to_have_text(["more for B"])
        assert await queue_texts(http, a) == ["more for A"]
        assert await queue_texts(http, b) == ["more for B"]
        await screenshot(tab_a, "1-two-tabs-a")
        await screenshot(tab_b, "1-two-tabs-b")
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, a) and run_finished(stack, b))
        await expect(tab_a.locator(".msg.assistant")).to_contain_text(["first answer"])
        await expect(tab_b.locator(".msg.assistant")).to_contain_text(["first answer"])
    a_sent = user_texts(stack.model.requests_for(a)[0].body)
    b_sent = user_texts(stack.model.requests_for(b)[0].body)
    assert "task for A" in a_sent and "B" not in a_sent
    assert "task for B" in b_sent and "A" not in b_sent
    assert "task for B" not in await tab_a.locator("#conversation").inner_text()
    assert "task for A" not in await tab_b.locator("#conversation").inner_text()


@pytest.mark.script(GATED)
async def test_2_switching_session_while_one_runs(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a, b = await new_session(http, "A"), await new_session(http, "B")
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "task for A")
        await eventually(lambda: len(stack.model.requests_for(a)) == 1)
        await expect(page.locator("#run-header .phase")).not_to_have_text("idle")
        # Enter in A, then straight to B: what was typed in A stays A's.
        await send(page, "late words for A")
        await page.click(f'#session-list li[data-id="{b}"] a')
        await loaded(page, b)
        await send(page, "task for B")  # B is idle: this starts B's run
        await eventually(lambda: len(stack.model.requests_for(b)) == 1)
        await send(page, "more for B")  # B is busy now: queued in B
        await expect(chips(page).locator(".chip-text")).to_have_text(["more for B"])
        await screenshot(page, "2-switched-to-b")
        assert await queue_texts(http, a) == ["late words for A"]
        assert await queue_texts(http, b) == ["more for B"]
        await page.click(f'#session-list li[data-id="{a}"] a')
        await loaded(page, a)
        await expect(chips(page).locator(".chip-text")).to_have_text(["late words for A"])
        assert "task for B" not in await page.locator("#conversation").inner_text()
        stack.model.release("go")
        # Each queued message starts its session's next run when the first one ends.
        await eventually(lambda: two_runs_ended(stack, a) and two_runs_ended(stack, b))
    a_first, a_second = (user_texts(r.body) for r in stack.model.requests_for(a))
    b_first, b_second = (user_texts(r.body) for r in stack.model.requests_for(b))
    assert "late words for A" in a_second and "B" not in a_first + a_second
    assert "more for B" in b_second and "A" not in b_first + b_second


@pytest.mark.script(GATED)
async def test_3_pending_chip_survives_a_reload(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a = await new_session(http, "A")
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "task")
        await eventually(lambda: len(stack.model.requests_for(a)) == 1)
        await send(page, "remember me")
        await expect(chips(page).locator(".chip-text")).to_have_text(["remember me"])
        await page.reload()
        await loaded(page, a)
        await expect(chips(page).locator(".chip-text")).to_have_text(["remember me"])
        await expect(chips(page).first).to_have_attribute("data-state", "pending")
        await screenshot(page, "3-chip-after-reload")
        stack.model.release("go")
        await eventually(lambda: run_finished(stack, a))


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {"reply": [{"tool_use": {"name": "bash", "input": {"command": BUILD_UNTIL_GO}}}]},
                {"reply": [{"text": "built, and the changelog is updated"}]},
            ]
        }
    }
)
async def test_4_guide_is_taken_at_the_nearest_safe_point(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a = await new_session(http, "A")
        workspace = Path((await stack.client.sessions.get(a)).workspace)
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "build it")
        await expect(page.locator('.tool[data-state="running"]')).to_be_visible()
        await send(page, "also update the changelog")
        chip = chips(page).first
        await chip.locator("button.guide").click()
        await expect(chip).to_have_attribute("data-kind", "guidance")
        await screenshot(page, "4-guidance-waiting")
        (workspace / "go").touch()  # the tool finishes: the next safe point is after it
        await expect(chip).to_contain_text("reached the agent after the running tool finished")
        row = page.locator("#activity .event.runtime_guidance_injected")
        await expect(row).to_contain_text("Guidance reached the model after the running tool")
        await screenshot(page, "4-guidance-taken")
        await expect(chips(page)).to_have_count(0)  # the chip says where, then leaves
        await eventually(lambda: run_finished(stack, a))
    hidden = user_texts(stack.model.requests_for(a)[1].body)
    assert "<runtime-guidance>" in hidden and "also update the changelog" in hidden
    # Guidance is not a chat message: a note says where the model received it.
    assert "also update the changelog" not in str(await page.locator(".msg").all_inner_texts())
    trace = page.locator("#conversation .guidance-mark")
    await expect(trace).to_contain_text("also update the changelog")
    await expect(trace).to_contain_text("after the running tool finished")


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                {
                    "wait_for": "go",
                    "reply": [
                        {"text": "I'll create it."},
                        {"tool_use": {"name": "bash", "input": {"command": "touch ran.txt"}}},
                    ],
                },
                {"reply": [{"text": "re-planned for the staging db"}]},
            ]
        }
    }
)
async def test_5_guidance_before_tools_replans_them(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a = await new_session(http, "A")
        workspace = Path((await stack.client.sessions.get(a)).workspace)
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "do it")
        await eventually(lambda: len(stack.model.requests_for(a)) == 1)
        await send(page, "use the staging db")
        await chips(page).first.locator("button.guide").click()
        await expect(chips(page).first).to_have_attribute("data-kind", "guidance")
        stack.model.release("go")  # the model plans a tool; the guidance is already there
        replan = page.locator("#activity .event.runtime_guidance_replan_before_tools")
        await expect(replan).to_contain_text("runtime_guidance_replan_before_tools")
        await expect(page.locator(".tool").first).to_have_attribute("data-state", "skipped")
        await expect(page.locator(".msg.assistant").last).to_contain_text("re-planned")
        await screenshot(page, "5-replan-before-tools")
        await eventually(lambda: run_finished(stack, a))
    assert not (workspace / "ran.txt").exists()  # the old plan never ran


@pytest.mark.script(bash_then_text("echo $$ > pid.txt; echo started; sleep 60"))
async def test_6_stop_kills_the_process_and_cancels_the_queue(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a = await new_session(http, "A")
        pid_file = Path((await stack.client.sessions.get(a)).workspace) / "pid.txt"
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "sleep a while")
        card = page.locator(".tool").first
        await expect(card.locator(".tool-output")).to_contain_text("started")
        pgid = int(pid_file.read_text())
        await send(page, "after that, tidy up")
        await expect(chips(page)).to_have_count(1)
        await page.click("#run-header button.stop")
        await expect(chips(page).first).to_have_attribute("data-state", "cancelled")
        await expect(card).to_have_attribute("data-state", "aborted")
        await expect(page.locator("#run-header .phase")).to_have_text("idle")
        await screenshot(page, "6-stopped")
        await eventually(lambda: not process_group_alive(pgid))
        cancelled = (await http.get(f"/api/sessions/{a}/input-queue?status=cancelled")).json()
        assert [i["text"] for i in cancelled] == ["after that, tidy up"]
        assert await queue_texts(http, a) == []
        await expect(chips(page)).to_have_count(0)


PART = "0123456789 " * 2000  # 22 KB, some 5,500 tokens
SUMMARY = {"match": "You are compacting", "reply": [{"text": "## Goal\nRead the six parts."}]}
TURN_START = {"match": "beginning of a turn", "reply": [{"text": "The user asked to read."}]}


@pytest.mark.script(
    {
        "conversations": {
            "*": [
                SUMMARY,
                TURN_START,
                *(
                    {"reply": [{"tool_use": {"name": "read", "input": {"path": f"part{i}.txt"}}}]}
                    for i in range(6)
                ),
                {"reply": [{"text": "read them all"}]},
                {"reply": [{"text": "still here after the compaction"}]},
            ]
        }
    }
)
async def test_7_compaction_keeps_the_displayed_history(
    stack: Stack, api: ApiServer, browser_context: Any
) -> None:
    async with stack.worker(), api.client() as http:
        a = await new_session(http, "A")
        workspace = Path((await stack.client.sessions.get(a)).workspace)
        for i in range(6):
            (workspace / f"part{i}.txt").write_text(PART)
        page = await signed_in(browser_context, api)
        await open_session(page, a)
        await send(page, "read all six parts")
        await expect(page.locator(".msg.assistant").last).to_contain_text("read them all")
        await expect(page.locator("#run-header .phase")).to_have_text("idle")
        # The run's messages as stored (they replace their live versions, same text).
        await expect(page.locator("#conversation .msg[data-live]")).to_have_count(0)
        before = await inner_texts(page, "#conversation .msg")
        await page.click("#run-header button.compact")
        await expect(page.locator(".compaction-mark")).to_be_visible()
        # Everything shown before is still shown, in the same order, above the marker.
        assert await inner_texts(page, "#conversation .msg") == before
        await page.reload()
        await loaded(page, a)
        await expect(page.locator(".compaction-mark")).to_be_visible()
        assert await inner_texts(page, "#conversation .msg") == before
        await send(page, "are you there?")
        await expect(page.locator(".msg.assistant").last).to_contain_text("still here")
        await screenshot(page, "7-after-compaction")
    sent = stack.model.requests_for(a)[-1].body
    first = sent["messages"][0]["content"]
    first_text = first if isinstance(first, str) else first[0]["text"]
    assert first_text.startswith("The conversation before this point was compacted")
    assert "Read the six parts" in first_text
    assert "part0.txt" not in str(sent["messages"][1:])  # the model sees the compacted context
