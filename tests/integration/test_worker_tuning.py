"""A worker takes on what its tuning allows; more waits in Temporal's queue and still runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support import Stack

MODEL_MS = 1500


@pytest.mark.script(
    {"conversations": {"*": [{"delay_ms": MODEL_MS, "reply": [{"text": "Done."}]}]}}
)
async def test_calls_beyond_the_limit_wait_their_turn(stack: Stack) -> None:
    """With room for one call at a time, two sessions' model calls run one after the
    other, and both runs complete: the second waits, it does not time out."""
    stack.settings = stack.settings.model_copy(update={"worker_max_activities": 1})
    first, second = await stack.client.sessions.create(), await stack.client.sessions.create()
    async with stack.worker():
        handles = [await stack.client.runs.prompt(s.id, "hello") for s in (first, second)]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)

    assert [r.status for r in results] == ["completed", "completed"]
    requests = sorted(
        r.received_at for s in (first, second) for r in stack.model.requests_for(s.id)
    )
    assert len(requests) == 2
    assert requests[1] - requests[0] >= MODEL_MS / 1000 * 0.9


TOOL_S = 1.5


async def test_tool_calls_on_a_host_queue_keep_to_the_limit_too(
    stack: Stack, tmp_path: Path
) -> None:
    """Tool calls go to the worker's host queue: with room for one call at a time there,
    two sessions' bash calls run one after the other (each notes when it started)."""
    starts = tmp_path / "starts"
    command = f"date +%s.%N >> {starts}; sleep {TOOL_S}"
    steps: list[dict[str, Any]] = [
        {"reply": [{"tool_use": {"name": "bash", "input": {"command": command}}}]},
        {"reply": [{"text": "Done."}]},
    ]
    stack.settings = stack.settings.model_copy(update={"worker_max_activities": 1})
    assert stack.settings.host_queue is not None  # the default: workspaces on this host
    sessions = [await stack.client.sessions.create(), await stack.client.sessions.create()]
    for session in sessions:
        stack.model.add_steps(session.id, steps, replace=True)
    async with stack.worker():
        handles = [await stack.client.runs.prompt(s.id, "run it") for s in sessions]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)

    assert [r.status for r in results] == ["completed", "completed"]
    first, second = sorted(float(line) for line in starts.read_text().split())
    assert second - first >= TOOL_S * 0.9
