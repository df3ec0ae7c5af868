"""A worker takes on what its tuning allows; more waits in Temporal's queue and still runs."""

from __future__ import annotations

import asyncio

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
    first, second = stack.client.create_session(), stack.client.create_session()
    async with stack.worker():
        handles = [await stack.client.prompt(s.id, "hello") for s in (first, second)]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)

    assert [r.status for r in results] == ["completed", "completed"]
    requests = sorted(
        r.received_at for s in (first, second) for r in stack.model.requests_for(s.id)
    )
    assert len(requests) == 2
    assert requests[1] - requests[0] >= MODEL_MS / 1000 * 0.9
