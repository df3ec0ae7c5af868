"""`duragent serve` stops at once on SIGTERM while a run waits for a budget raise and a
page follows the session's events: the event stream ends (the page reconnects to the next
server), the process exits within a couple of seconds, and the run stays open for later."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time

import httpx
import pytest
from support import REPO, Stack, eventually

from duragent.domain.budgets import Budget

STOP_WITHIN_S = 2.5
"""A couple of seconds: the worker in the process and the HTTP side stop in well under
one; open event streams used to hold the stop for the whole grace period (3 s)."""
TOKEN = "serve-token"
ONE_TOOL_CALL = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "ls", "input": {"path": "."}}}]},
            {"reply": [{"text": "done"}]},
        ]
    }
}


@pytest.mark.script(ONE_TOOL_CALL)
async def test_serve_stops_at_once_with_a_run_waiting_for_a_budget_raise(
    stack: Stack, unused_tcp_port: int
) -> None:
    log = stack.settings.home / "serve.log"
    with open(log, "wb") as output:
        serving = subprocess.Popen(
            [sys.executable, "-m", "duragent.client.cli", "serve", "--port", str(unused_tcp_port)],
            cwd=REPO,
            env={**stack.env(), "DURAGENT_API_TOKENS": f"{TOKEN}=default"},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await eventually(lambda: b"Uvicorn running" in log.read_bytes(), timeout=60)
        session = await stack.client.sessions.create()
        # The run's worker is the one `serve` started (none other polls the task queue).
        await stack.client.runs.prompt(
            session.id, "look around", budget=Budget(max_turns=1, on_exceed="ask")
        )

        async def waits() -> bool:
            return (await stack.client.sessions.status(session.id)).phase == "awaiting_budget"

        await eventually(waits, timeout=30)
        base = f"http://127.0.0.1:{unused_tcp_port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as http,
            http.stream("GET", f"/api/sessions/{session.id}/events") as events,
        ):
            lines = events.aiter_lines()
            while not (await anext(lines)).startswith("event: "):
                pass  # the page follows the session's events
            stopped_at = time.monotonic()
            serving.send_signal(signal.SIGTERM)
            try:
                async for _ in lines:
                    pass
                ended = "whole"
            except httpx.HTTPError as error:
                ended = f"cut off ({error!r})"
            code = await asyncio.to_thread(serving.wait, 30)
            took = time.monotonic() - stopped_at
        assert code == -signal.SIGTERM, log.read_text()
        assert took < STOP_WITHIN_S, f"stopped after {took:.1f} s:\n{log.read_text()}"
        assert ended == "whole", ended  # a response that ends, not a broken connection
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        if serving.poll() is None:
            serving.kill()
            serving.wait()
    # The run stays open: it still waits, and goes on when the budget is raised.
    assert (await stack.client.sessions.status(session.id)).phase == "awaiting_budget"
    async with stack.worker():
        await stack.client.budgets.raise_limits(session.id, Budget(max_turns=5, on_exceed="ask"))
        result = await stack.client.runs.wait(session.id)
    assert (result.status, result.turns) == ("completed", 2), result
