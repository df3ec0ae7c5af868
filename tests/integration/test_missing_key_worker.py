"""A worker embedded in a user's program (`duragent.TemporalPlugin` on the user's Temporal
worker) with no key for its model's provider, no address and no offline model: it says
so in one line as it starts, and a run's model call fails at once, naming the variable,
instead of reaching the provider's real address."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from support import Stack
from temporalio.client import Client
from temporalio.worker import Worker
from user_workflows import CountSessions, count_sessions

import duragent


async def test_an_embedded_worker_without_a_key_says_so_and_its_calls_fail_at_once(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    settings = stack.settings.model_copy(
        update={"anthropic_base_url": None, "anthropic_api_key": None, "offline_model_url": None}
    )
    plugin = duragent.TemporalPlugin(settings, db=stack.db)
    client = await Client.connect(settings.temporal_address, plugins=[plugin])
    users = duragent.DuragentClient(client, stack.db, settings)
    session = await users.sessions.create()
    queue = f"user-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client, task_queue=queue, workflows=[CountSessions], activities=[count_sessions]
    )
    with caplog.at_level(logging.WARNING, logger="duragent"):
        async with worker:
            handle = await users.runs.prompt(session.id, "hello")
            # Retried, an unreachable provider takes minutes; refused, a moment.
            result = await asyncio.wait_for(handle.result(), timeout=60)
    notices = [r.getMessage() for r in caplog.records if "ANTHROPIC_API_KEY" in r.getMessage()]
    assert notices == [
        f"No ANTHROPIC_API_KEY: calls to anthropic:{settings.model} will fail; set it (or "
        "ANTHROPIC_BASE_URL for a server of your own), or DURAGENT_OFFLINE_MODEL_URL for the "
        "offline model (duragent run and duragent worker start one)"
    ]
    assert result.status == "error"
    assert result.error is not None and "No ANTHROPIC_API_KEY" in result.error
    assert result.turns <= 1
