"""Start what a command needs when it is not already there: the Temporal dev server,
the offline model (no API key), a worker. Everything started here stops on exit."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from temporal_dev import DevServer, is_reachable
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from client.connection import connect_temporal, open_store
from offline_model import DEMO_SCRIPT, OfflineModelServer
from settings import Settings

Announce = Callable[[str], None]
LIVE_POLLER_S = 70
"""A worker long-polls at least once a minute; an older poller is presumed gone."""


def _local_port(address: str) -> int | None:
    host, _, port = address.rpartition(":")
    if host in ("127.0.0.1", "localhost", "[::1]") and port.isdigit():
        return int(port)
    return None


async def has_live_worker(client: Client, settings: Settings) -> bool:
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=settings.temporal_namespace,
            task_queue=TaskQueue(name=settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = time.time()
    return any(
        now - poller.last_access_time.ToSeconds() < LIVE_POLLER_S for poller in response.pollers
    )


@contextlib.asynccontextmanager
async def ensure_temporal(settings: Settings, announce: Announce) -> AsyncIterator[None]:
    if await is_reachable(settings.temporal_address, settings.temporal_namespace):
        yield
        return
    port = _local_port(settings.temporal_address)
    if port is None:
        raise RuntimeError(
            f"Temporal at {settings.temporal_address} is not reachable "
            f"(namespace {settings.temporal_namespace})"
        )
    server = DevServer(
        settings.dev_server_db, port=port, ui_port=settings.web_ui_port, headless=False
    )
    await server.astart()
    announce(
        f"Started a Temporal dev server at {server.address} (history in {settings.dev_server_db});"
        f" web UI: {server.ui_url}"
    )
    try:
        yield
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def ensure_model(settings: Settings, announce: Announce) -> AsyncIterator[Settings]:
    """With no API key and no base URL, serve the offline model and point settings at it."""
    if not settings.offline or settings.anthropic_base_url:
        yield settings
        return
    script = settings.offline_script or DEMO_SCRIPT
    server = OfflineModelServer(script)
    server.start()
    announce(
        f"No ANTHROPIC_API_KEY: using the offline model, which plays scripted replies from "
        f"{script.name}. It is not Claude; set ANTHROPIC_API_KEY to use Claude."
    )
    try:
        yield settings.model_copy(update={"anthropic_base_url": server.base_url})
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def ensure_worker(settings: Settings, announce: Announce) -> AsyncIterator[None]:
    from worker import build_worker

    client = await connect_temporal(settings)
    if await has_live_worker(client, settings):
        yield
        return
    db = open_store(settings)
    async with build_worker(client, db, settings):
        announce(f"Started a worker in this process (task queue {settings.task_queue}).")
        yield
    db.dispose()


@contextlib.asynccontextmanager
async def local_services(
    settings: Settings, announce: Announce, *, worker: bool = True
) -> AsyncIterator[Settings]:
    """Temporal, the model and (optionally) a worker, started here if missing."""
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(ensure_temporal(settings, announce))
        settings = await stack.enter_async_context(ensure_model(settings, announce))
        if worker:
            await stack.enter_async_context(ensure_worker(settings, announce))
        yield settings
