"""duragent inside a Temporal worker of the user's: `duragent.TemporalPlugin` on the
user's client, one `Worker` with the user's workflow, and a duragent session run too."""

from __future__ import annotations

import uuid

import pytest
from support import Stack
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.worker import Worker
from user_workflows import CountSessions, count_sessions

import duragent

SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},
            {"reply": [{"text": "Listed."}]},
        ]
    }
}


@pytest.mark.script(SCRIPT)
async def test_a_users_workflow_and_duragent_run_on_one_worker(stack: Stack) -> None:
    plugin = duragent.TemporalPlugin(stack.settings, db=stack.db)
    client = await Client.connect(stack.settings.temporal_address, plugins=[plugin])
    converter = client.data_converter.payload_converter_class
    assert issubclass(converter, PydanticPayloadConverter)
    queue = f"user-{uuid.uuid4().hex[:8]}"
    worker = Worker(
        client, task_queue=queue, workflows=[CountSessions], activities=[count_sessions]
    )
    users = duragent.DuragentClient(client, stack.db, stack.settings)
    session = await users.sessions.create()
    async with worker:
        counted = await client.execute_workflow(
            CountSessions.run,
            [str(stack.settings.home), stack.settings.database_url],
            id=f"count-{uuid.uuid4().hex}",
            task_queue=queue,
        )
        assert counted == "1 session(s)"
        result = await (await users.runs.prompt(session.id, "look around")).result()
    assert result.status == "completed", result.error
    assert result.final_text == "Listed."
    assert result.turns == 2
