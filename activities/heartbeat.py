"""Heartbeat in the background while an activity works, paced across the process.

Heartbeats are how Temporal notices a dead worker (heartbeat timeout) and how it tells
a live one that its activity was cancelled (the reply to a heartbeat). Each is one RPC
the server handles, so a process's running activities share a budget (`HeartbeatPace`):
while few run, each heartbeats every `floor` (50 ms: abort latency); with many, they
spread out so that together they send about `rate` a second, never less often than a
quarter of the activity's heartbeat timeout (so a live worker is never taken for lost).

A cancellation the worker itself just asked the server for (its workflow task cancels
the activity: an abort, a guidance interrupt) is hinted in process (`hint_cancel`, from
`client.workflow_runner`): the activity heartbeats at once and then every `floor` until the
reply carries the cancellation, so aborts stay fast under load on the common path. An
activity on another process learns of it at its next paced heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

HEARTBEAT_INTERVAL_S = 0.05
"""The floor: how often each activity heartbeats while few run."""

HEARTBEAT_RATE = 100.0
"""Heartbeats a second a process's activities send together, at most, once spread out."""

HINTED_FOR_S = 10.0
"""How long a hinted activity heartbeats at the floor: the server records the
cancellation once the workflow task that asked for it completes."""


@dataclass
class _Beating:
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    hinted_until: float = 0.0


def pace_interval(
    running: int, rate: float, floor: float, heartbeat_timeout: float | None
) -> float:
    """Seconds between one activity's heartbeats when `running` share `rate` a second:
    `floor` at least, a quarter of the heartbeat timeout at most."""
    spread = max(floor, running / rate)
    if heartbeat_timeout is None:
        return spread
    return min(spread, max(floor, heartbeat_timeout / 4))


class HeartbeatPace:
    """How often each running activity of this process heartbeats (see the module)."""

    def __init__(self, rate: float = HEARTBEAT_RATE, floor: float = HEARTBEAT_INTERVAL_S):
        self.rate = rate
        self.floor = floor
        self._lock = threading.Lock()  # hints arrive from workflow task threads
        self._running: dict[tuple[str, str], _Beating] = {}

    def configure(self, *, rate: float, floor: float) -> None:
        self.rate, self.floor = rate, floor

    def interval(self, heartbeat_timeout: float | None) -> float:
        """Seconds until an activity's next heartbeat, with this many running now."""
        return pace_interval(len(self._running), self.rate, self.floor, heartbeat_timeout)

    def hint_cancel(self, workflow_id: str, activity_id: str) -> None:
        """The activity's cancellation is on its way to the server: beat now, and fast."""
        with self._lock:
            beating = self._running.get((workflow_id, activity_id))
        if beating is not None:
            beating.loop.call_soon_threadsafe(self._hinted, beating)

    def _hinted(self, beating: _Beating) -> None:
        beating.hinted_until = time.monotonic() + HINTED_FOR_S
        beating.wake.set()

    @contextlib.asynccontextmanager
    async def beating(self, send: Callable[[], None]) -> AsyncIterator[None]:
        """Call `send` at this process's pace while the block runs (inside an activity)."""
        info = activity.info()
        key = (info.workflow_id or "", info.activity_id)
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else None
        me = _Beating(asyncio.get_running_loop())

        async def beat() -> None:
            while True:
                send()
                me.wake.clear()
                pause = self.floor if time.monotonic() < me.hinted_until else self.interval(timeout)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await me.wake.wait()

        with self._lock:
            self._running[key] = me
        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            with self._lock:
                if self._running.get(key) is me:
                    del self._running[key]
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


PACE = HeartbeatPace()
"""The process's pace: every worker built in it shares one budget (`configure`)."""


def heartbeating(
    details: Callable[[], Any] | None = None,
) -> contextlib.AbstractAsyncContextManager[None]:
    """While the block runs, heartbeat at the process's pace, with `details()` if given."""

    def send() -> None:
        if details is None:
            activity.heartbeat()
        else:
            activity.heartbeat(details())

    return PACE.beating(send)
