"""`duragent chat` where no screen can be drawn (`TERM=dumb`, a pipe, a file): `duragent
run`'s plain stream of lines. Each line read is sent as the box's Enter sends it (an idle
session starts a run, a busy one queues the line for the next); what happens is printed
as `run` prints it; at the end of the input it waits until the session is idle and exits
with the last run's outcome (0 completed, 1 error, 130 aborted).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TextIO

from rich.console import Console

from duragent.client.chat.link import Link
from duragent.client.errors import DuragentError
from duragent.client.render import EventPrinter
from duragent.domain.cost import SessionCosts
from duragent.store.records import QueueItem

EXIT_CODES = {"completed": 0, "error": 1, "aborted": 130}


async def plain_chat(
    link: Link,
    session_id: str,
    lines: TextIO,
    console: Console,
    announce: Callable[[str], None],
) -> int:
    costs: SessionCosts | None = None

    def run_cost(run_id: str) -> str:
        if costs is None:
            return "cost unknown"
        cost = costs.of_run(run_id)
        return f"{cost.text} ({cost.usage.total_tokens:,} tokens)"

    printer = EventPrinter(console, session_id, run_cost)
    page = await link.opening(session_id)
    running = page.latest_run is not None and page.latest_run.status == "running"
    starts = [i for i, e in enumerate(page.events) if e.type == "agent_start"]
    cursor = page.events[-1].seq if page.events else 0
    if running:  # attached to a run in progress: it shows from its start
        for event in page.events[starts[-1] if starts else 0 :]:
            printer.show(event)
    input_over = asyncio.Event()

    async def show() -> None:
        nonlocal costs, cursor
        async for batch in link.follow(session_id, cursor):
            for event in batch:
                if event.type == "agent_end":
                    costs = await link.costs(session_id)
                printer.show(event)
                cursor = event.seq
            if not batch and input_over.is_set():
                return

    shown = asyncio.create_task(show())
    try:
        while line := await asyncio.to_thread(lines.readline):
            text = line.rstrip("\n")
            if not text.strip():
                continue
            try:
                sent = await link.send(session_id, text)
            except DuragentError as error:
                announce(f"not sent: {error}")
                continue
            if isinstance(sent, QueueItem):
                announce(f"queued for the next run: {text}")
        result = await link.wait_idle(session_id)
        input_over.set()
        await shown
    finally:
        shown.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await shown
        printer.close()
    if result is None:
        runs = await link.runs(session_id)
        return EXIT_CODES.get(runs[0].status, 0) if runs else 0
    return EXIT_CODES.get(result.status, 1)
