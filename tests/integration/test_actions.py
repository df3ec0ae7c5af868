"""What a run costs on Temporal, read from the dev server's own `action` counter (the
metric Temporal Cloud bills by): a few actions per turn, however long its calls run.
`bench/actions.py` gives the figure for longer calls."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from support import Stack, open_stack

from duragent.client.connection import connect_temporal
from duragent.settings import Settings
from duragent.temporal_dev import DevServer
from duragent.temporal_dev.ports import free_port

CALL_MS = 1500
"""Each model call and each tool call: a heartbeat timeout (the suite's 3 s) and a half;
the 50 ms heartbeats of old cost 30 actions a call each."""

TURNS = 2
"""Tool turns, then an answer: three turns."""

_ACTION = re.compile(r"^action\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.MULTILINE)


@pytest.fixture
async def metered(tmp_path: Path) -> AsyncIterator[tuple[Stack, str]]:
    """A stack on a dev server of its own (no other test's actions), and its metrics URL."""
    port = free_port("127.0.0.1")
    server = DevServer(tmp_path / "temporal" / "temporal.db", metrics_port=port)
    await server.astart()
    try:
        settings = Settings.from_env(home=tmp_path, temporal_address=server.address)
        temporal = await connect_temporal(settings)
        home = tmp_path / "home"
        home.mkdir()
        async with open_stack(home, temporal, server.address, {"conversations": {}}) as stack:
            yield stack, f"http://127.0.0.1:{port}/metrics"
    finally:
        server.stop()


async def actions(url: str) -> Counter[str]:
    """The server's actions in the default namespace, by type."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(url)).text
    counts: Counter[str] = Counter()
    for match in _ACTION.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("namespace") == "default":
            counts[labels["action_type"]] += int(float(match["value"]))
    return counts


async def test_a_turn_costs_a_few_actions(metered: tuple[Stack, str]) -> None:
    stack, url = metered
    bash = {"tool_use": {"name": "bash", "input": {"command": f"sleep {CALL_MS / 1000}"}}}
    steps = [
        *({"delay_ms": CALL_MS, "reply": [bash]} for _ in range(TURNS)),
        {"delay_ms": CALL_MS, "reply": [{"text": "Done."}]},
    ]
    session = await stack.client.sessions.create()
    stack.model.add_steps(session.id, steps, replace=True)
    async with stack.worker():
        before = await actions(url)
        result = await (await stack.client.runs.prompt(session.id, "work")).result()
        assert result.status == "completed", result.error
    after = await actions(url)
    after.subtract(before)
    spent = +after
    turns = TURNS + 1
    assert sum(spent.values()) <= 10 * turns, spent
    # One heartbeat a third of the heartbeat timeout (1 s here), none at the start.
    assert spent["grpc_RecordActivityTaskHeartbeat"] <= 2 * (2 * TURNS + 1), spent
