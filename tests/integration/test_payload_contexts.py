"""Payload contexts: a worker's workflows ask which workflow or activity a payload
belongs to only when its data converter uses that (a codec keyed by workflow, as
encryption by tenant would be), and then every payload is converted in its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from support import open_stack
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)

from duragent.client.workflow_runner import uses_contexts
from duragent.temporal_dev import DevServer

KEYED = b"binary/workflow-keyed"

SCRIPT = {
    "conversations": {
        "*": [
            {"reply": [{"tool_use": {"name": "ls", "input": {}}}]},
            {"reply": [{"text": "Listed."}]},
        ]
    }
}


class WorkflowKeyedCodec(PayloadCodec, WithSerializationContext):
    """Wraps each payload under its workflow's id, and refuses to unwrap it in another
    workflow's context (or in none)."""

    def __init__(self, workflow_id: str | None = None) -> None:
        self.workflow_id = workflow_id

    def with_context(self, context: SerializationContext) -> Self:
        workflow_id = getattr(context, "workflow_id", None)
        return self if workflow_id == self.workflow_id else type(self)(workflow_id)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if self.workflow_id is None:
            return list(payloads)
        key = self.workflow_id.encode()
        return [
            Payload(metadata={"encoding": KEYED, "key": key}, data=p.SerializeToString())
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != KEYED:
                decoded.append(payload)
                continue
            key = payload.metadata["key"].decode()
            if key != self.workflow_id:
                raise ValueError(f"a payload of workflow {key} read as {self.workflow_id}'s")
            decoded.append(Payload.FromString(payload.data))
        return decoded


KEYED_CONVERTER = DataConverter(
    payload_converter_class=PydanticPayloadConverter, payload_codec=WorkflowKeyedCodec()
)


def test_a_converter_is_asked_whether_it_uses_contexts() -> None:
    assert not uses_contexts(pydantic_data_converter)
    assert uses_contexts(KEYED_CONVERTER)


async def test_a_codec_keyed_by_workflow_gets_each_payloads_workflow(
    tmp_path: Path, temporal: Client, dev_server: DevServer
) -> None:
    keyed = Client(
        temporal.service_client, namespace=temporal.namespace, data_converter=KEYED_CONVERTER
    )
    async with open_stack(tmp_path, keyed, dev_server.address, SCRIPT) as stack:
        session = await stack.client.sessions.create()
        async with stack.worker():
            run = await stack.client.runs.prompt(session.id, "look around")
            # A payload read in the wrong context fails its workflow task again and again.
            async with asyncio.timeout(60):
                result = await run.result()
        assert result.status == "completed", result.error
        assert result.final_text == "Listed."
        history = await run.workflow.fetch_history()
    turns = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert turns, "the run scheduled no activity"
    for turn in turns:
        [payload] = turn.input.payloads
        assert payload.metadata["encoding"] == KEYED
        assert payload.metadata["key"].decode() == run.workflow.id
