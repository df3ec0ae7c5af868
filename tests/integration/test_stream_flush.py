"""DURAGENT_STREAM_FLUSH_MS: how often a streamed reply is written to the store, where
readers follow it. A fleet sets it higher to spare the shared store; the reply stored at
the end is whole either way."""

from __future__ import annotations

import pytest
from support import Stack

from duragent.domain.entries import MessageEntry
from duragent.domain.messages import AssistantMessage

pytestmark = pytest.mark.in_process_model

WORDS = "word " * 80  # 20 characters a delta: 20 deltas, 50 ms apart, about a second


async def stored_updates(stack: Stack, session_id: str) -> int:
    updates = 0
    async for event in stack.client.events.stream(session_id, follow=False):
        updates += event.type == "message_update"
    return updates


@pytest.mark.script({"conversations": {"*": [{"chunk_delay_ms": 50, "reply": [{"text": WORDS}]}]}})
async def test_a_longer_flush_writes_a_streamed_reply_in_fewer_batches_and_loses_nothing(
    stack: Stack,
) -> None:
    counts = {}
    for flush_ms in (50, 400):
        stack.settings = stack.settings.model_copy(update={"stream_flush_ms": flush_ms})
        session = await stack.client.sessions.create()
        async with stack.worker():
            result = await (await stack.client.runs.prompt(session.id, "talk")).result()
        assert result.status == "completed"
        path = await stack.client.tree.path(session.id)
        reply = path[-1]
        assert isinstance(reply, MessageEntry) and isinstance(reply.message, AssistantMessage)
        assert reply.message.content[0].text == WORDS  # type: ignore[union-attr]
        counts[flush_ms] = await stored_updates(stack, session.id)
    # About a second of stream: a batch every 50 ms, or every 400 ms (the first at once).
    assert counts[400] <= 5, counts
    assert counts[50] >= 2 * counts[400], counts
