"""Page latency: a model delta to the text in the web page's DOM, in a real browser; and the
time to open a session of 2,000 turns.

The deployment as users run it: a worker process, an API process (`duragent serve`) that
also serves the page, and Chromium (Debian's, driven by Playwright) showing the page. The
offline model streams a text reply one delta every `--chunk-delay-ms` and logs when it sent
each; a MutationObserver in the page records when the streamed text grew (timeOrigin +
performance.now(), the same clock). Each growth is measured from the model sending the
newest delta it shows. That covers the SDK, the activity's event writer, the store, the
API's polling, the page's stream reader and its rendering.

The long session is made by a real run of 2,000 turns (one tool call each, compacting
as it goes); opening it is timed from navigation start to its newest messages on screen,
as a fresh load of the page and as a switch from another session.

    python bench/page_latency.py [--runs 3] [--chunk-delay-ms 100] [--turns 2000]

Last line: `page_latency: X ms` (median delta-to-DOM).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

import httpx
from common import Bench, bench_stack, median, p95
from long_horizon import script as long_script
from processes import CHROMIUM, CHROMIUM_ARGS
from stream_latency import API_ENV, TOKEN, api_ready, free_port, processes

from duragent.domain.compaction import CompactionSettings
from duragent.offline_model.protocol import CHUNK_CHARS

USER = API_ENV["DURAGENT_API_TOKENS"].split("=")[1]  # the user the bench's token names
REPLY = " ".join(f"word{i:03d}" for i in range(100))  # 800 characters: 40 deltas
OBSERVE = """() => {
    window.__grew = [];
    const root = document.getElementById("conversation");
    let last = 0;
    new MutationObserver(() => {
        const block = root.querySelector(".msg.assistant .text");
        const length = block ? block.textContent.length : 0;
        if (length > last) {
            last = length;
            window.__grew.push([performance.timeOrigin + performance.now(), length]);
        }
    }).observe(root, { childList: true, subtree: true, characterData: true });
}"""


async def open_session(page: Any, session_id: str) -> None:
    await page.evaluate("id => { location.hash = '#/s/' + id; }", session_id)
    await page.wait_for_selector(f'#session[data-session="{session_id}"][data-loaded="true"]')


async def one_run(bench: Bench, http: httpx.AsyncClient, page: Any, delay: int) -> list[float]:
    """Per growth of the streamed text: ms from the model sending it to the page showing it."""
    session_id = (await http.post("/api/sessions", json={})).json()["session"]["id"]
    bench.model.add_steps(
        session_id, [{"reply": [{"text": REPLY}], "chunk_delay_ms": delay}], replace=True
    )
    await open_session(page, session_id)
    await page.evaluate(OBSERVE)
    await page.fill("#composer .box", "go")
    await page.press("#composer .box", "Enter")
    await page.wait_for_selector(".msg.assistant:not([data-live])", timeout=120_000)
    grew: list[list[float]] = await page.evaluate("window.__grew")
    (request,) = bench.model.requests_for(session_id)
    sent = request.deltas_sent_at
    if not grew or grew[-1][1] != len(REPLY):
        raise AssertionError(f"the page showed {grew[-1][1] if grew else 0} of {len(REPLY)}")
    return [at - sent[math.ceil(length / CHUNK_CHARS) - 1] * 1000 for at, length in grew]


async def long_session(bench: Bench, turns: int) -> str:
    """A session with `turns` turns, made by a real run."""
    bench.model.add_steps("*", long_script(turns)["conversations"]["*"], replace=True)
    session = await bench.client.sessions.create(owner=USER)
    options = bench.client.runs.default_options().model_copy(
        update={
            "compaction": CompactionSettings(
                context_window=12_000, reserve_tokens=0, keep_recent_tokens=3_000
            )
        }
    )
    started = time.monotonic()
    run = await bench.client.runs.prompt(session.id, "list it again and again", options=options)
    result = await run.result()
    assert result.status == "completed", result.error
    print(f"made a session of {result.turns} turns in {time.monotonic() - started:.0f} s")
    return session.id


async def open_times(page: Any, base: str, session_id: str, other_id: str) -> tuple[float, float]:
    """(fresh page load, switch from another session) to the session shown, median ms."""
    loads, switches = [], []
    for _ in range(5):
        await page.goto("about:blank")  # a fresh load, not a change of the address's hash
        await page.goto(f"{base}/#/s/{session_id}")
        await page.wait_for_selector(f'#session[data-session="{session_id}"][data-loaded="true"]')
        loads.append(await page.evaluate("performance.now()"))
        await open_session(page, other_id)
        started = await page.evaluate("performance.now()")
        await open_session(page, session_id)
        switches.append(await page.evaluate("performance.now()") - started)
    shown = await page.locator("#conversation .msg").count()
    print(f"the long session opens showing its newest {shown} messages")
    return median(loads), median(switches)


async def main() -> None:
    from playwright.async_api import async_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chunk-delay-ms", type=int, default=100)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with bench_stack({"conversations": {}}) as bench, async_playwright() as playwright:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        with processes(bench, port):
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
                await api_ready(http)
                page = await (await browser.new_context()).new_page()
                await page.goto(base + "/")
                await page.fill("#token", TOKEN)
                await page.click("#sign-in-form button[type=submit]")
                await page.wait_for_selector("#app:not([hidden])")
                await one_run(bench, http, page, args.chunk_delay_ms)  # warm-up
                samples: list[float] = []
                for _ in range(args.runs):
                    samples += await one_run(bench, http, page, args.chunk_delay_ms)
                other = (await http.post("/api/sessions", json={})).json()["session"]["id"]
                long_id = await long_session(bench, args.turns)
                load_ms, switch_ms = await open_times(page, base, long_id, other)
            await browser.close()  # its event stream would hold the API open
    print(f"{args.runs} runs, {len(samples)} text updates, a delta every {args.chunk_delay_ms} ms")
    print(
        f"model sent → text in the page: median {median(samples):.1f} ms, p95 {p95(samples):.1f} ms"
    )
    print(
        f"open a {args.turns}-turn session: page load {load_ms:.0f} ms, switch {switch_ms:.0f} ms"
    )
    print(f"page_latency: {median(samples):.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
