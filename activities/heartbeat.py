"""Heartbeat in the background while an activity works.

Heartbeats are how Temporal notices a dead worker (heartbeat timeout) and how it tells
a live one that its activity was cancelled (the reply to a heartbeat). Sending one every
`interval` keeps abort latency low; the worker's throttle decides how many reach the
server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity

HEARTBEAT_INTERVAL_S = 0.05


@contextlib.asynccontextmanager
async def heartbeating(
    details: Callable[[], Any] | None = None, interval: float = HEARTBEAT_INTERVAL_S
) -> AsyncIterator[None]:
    """While the block runs, heartbeat every `interval` with `details()` if given."""

    async def beat() -> None:
        while True:
            if details is None:
                activity.heartbeat()
            else:
                activity.heartbeat(details())
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
