"""A small FastAPI app of your own that starts a duragent session and streams its events.

    uvicorn examples.fastapi_app:app        (from the repository, or with this folder on
                                             the path: uvicorn fastapi_app:app)
    curl -N 'http://127.0.0.1:8000/ask?q=Write+a+hello+script'

Each request starts a session, prompts it and streams its run events as Server-Sent
Events until the run ends. The app starts the Temporal dev server (when none runs), a
duragent worker and, with no ANTHROPIC_API_KEY, the offline model, for its lifetime.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import StreamingResponse

import duragent

agents: dict[str, duragent.DuragentClient] = {}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        # The local services and a worker in this process; in production, connect to your
        # Temporal and store instead (`DuragentClient.connect(settings)`) and run workers
        # apart (`duragent worker`).
        agents["client"] = await stack.enter_async_context(duragent.local())
        yield
        agents.clear()


app = FastAPI(lifespan=lifespan)


@app.get("/ask")
async def ask(q: str) -> StreamingResponse:
    client = agents["client"]
    session = await client.sessions.create(name=q[:40])
    run = await client.runs.prompt(session.id, q)

    async def events() -> AsyncIterator[str]:
        async for event in client.events.stream(session.id, run_id=run.run_id):
            data = json.dumps({"type": event.type, **event.payload})
            yield f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
