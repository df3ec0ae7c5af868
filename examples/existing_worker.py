"""duragent inside a Temporal worker you already run, next to a workflow of your own.

    python examples/existing_worker.py

`duragent.TemporalPlugin` on your client gives it the converter duragent needs, and your
`Worker` then runs duragent's worker alongside your workflows (on duragent's own task
queue). Your workflow here starts nothing of duragent's; an activity of yours could.
With no ANTHROPIC_API_KEY the offline model plays its bundled demo.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

import duragent
from duragent.client.services import ensure_model, ensure_temporal  # developer helpers


@activity.defn
async def greet(name: str) -> str:
    return f"Hello, {name}!"


@workflow.defn
class Greeting:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )


async def main() -> None:
    settings = duragent.Settings.from_env()
    async with (
        ensure_temporal(settings, print) as settings,
        ensure_model(settings, print) as settings,
    ):
        plugin = duragent.TemporalPlugin(settings)
        client = await Client.connect(
            settings.temporal_address, namespace=settings.temporal_namespace, plugins=[plugin]
        )
        worker = Worker(client, task_queue="my-app", workflows=[Greeting], activities=[greet])
        agents = await duragent.DuragentClient.connect(settings)
        async with worker:  # your workflows, and duragent's
            greeting = await client.execute_workflow(
                Greeting.run, "duragent", id=f"greeting-{uuid.uuid4().hex}", task_queue="my-app"
            )
            print(greeting)
            session = await agents.sessions.create(name="beside my workflows")
            result = await (await agents.runs.prompt(session.id, "Write a hello script")).result()
            print(f"{result.status} after {result.turns} turns: {result.final_text}")


if __name__ == "__main__":
    asyncio.run(main())
