"""Heartbeat in the background while an activity works: for liveness only, and fast only
when a cancellation is on its way.

Heartbeats are how Temporal notices a dead worker (heartbeat timeout) and how it tells a
live one that its activity was cancelled (the reply to a heartbeat). Each one the server
records is an RPC it serves, and on Temporal Cloud an Action it bills. So a running call
heartbeats only as often as its liveness needs: every `LIVENESS_FRACTION` of its
heartbeat timeout (3.3 s at 10 s), none at its start. What the call would report (output
so far, process groups) is kept locally by the caller (`details()` is read at each
heartbeat), and reaches Temporal at that pace.

A cancellation is made fast by a nudge instead of by fast heartbeats: when the worker
process whose workflow task cancels a call (an abort, a guidance interrupt) sends the
cancel command, `hint_cancel` is called, in that process directly and in every other
worker process through the store (`activities.cancel_hints`). A hinted call heartbeats
at once, then after `floor` (10 ms), then at pauses that double up to `HINTED_CAP` times
`floor` (50 ms), for `HINTED_FOR_S`, until the reply carries the cancellation and the
call ends: the server records the cancellation only once the workflow task that asked
for it completes, usually a few milliseconds after the hint, so the first beats come
soon. Temporal stays the source of truth: a hint only makes a call ask sooner; a hint
for a call that is not cancelled costs a few heartbeats.
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

HEARTBEAT_INTERVAL_S = 0.01
"""The floor: the first pause of a hinted call (and the SDK's throttle: each of these
heartbeats is sent)."""

HINTED_CAP = 5
"""A hinted call's pauses double from the floor up to this many floors."""

LIVENESS_FRACTION = 1 / 3
"""A call heartbeats every this much of its heartbeat timeout: two may be lost or late
before a live worker is taken for lost."""

DEFAULT_LIVENESS_S = 10.0
"""How often a call heartbeats when it has no heartbeat timeout."""

HINTED_FOR_S = 10.0
"""How long a hinted call heartbeats at the floor: the server records the cancellation
once the workflow task that asked for it completes (milliseconds, or seconds under
load); past this the call is back at its liveness pace."""

CallKey = tuple[str, str, str]
"""A running call: (workflow id, run id, activity id). Activity ids repeat across the
runs of one session workflow; the run id tells them apart."""


@dataclass
class _Beating:
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    hinted_until: float = 0.0
    hinted_beats: int = 0


def liveness_interval(heartbeat_timeout: float | None, floor: float) -> float:
    """Seconds between a call's heartbeats while it is not hinted: a fraction of its
    heartbeat timeout, never under `floor`."""
    if heartbeat_timeout is None:
        return DEFAULT_LIVENESS_S
    return max(floor, heartbeat_timeout * LIVENESS_FRACTION)


class HeartbeatPace:
    """When each running call of this process heartbeats (see the module)."""

    def __init__(self, floor: float = HEARTBEAT_INTERVAL_S):
        self.floor = floor
        self._lock = threading.Lock()  # hints arrive from workflow task and store threads
        self._running: dict[CallKey, _Beating] = {}

    def configure(self, *, floor: float) -> None:
        self.floor = floor

    def running(self) -> bool:
        """Whether any call of this process is running (heartbeating) now."""
        return bool(self._running)

    def hint_cancel(self, key: CallKey) -> bool:
        """The call's cancellation is on its way to the server: beat now, and fast.
        Whether the call runs here (from any thread)."""
        with self._lock:
            beating = self._running.get(key)
        if beating is None:
            return False
        with contextlib.suppress(RuntimeError):  # its loop closed: the call is over
            beating.loop.call_soon_threadsafe(self._hinted, beating)
        return True

    def _hinted(self, beating: _Beating) -> None:
        beating.hinted_until = time.monotonic() + HINTED_FOR_S
        beating.hinted_beats = 0
        beating.wake.set()

    @contextlib.asynccontextmanager
    async def beating(self, send: Callable[[], None]) -> AsyncIterator[None]:
        """Call `send` at this process's pace while the block runs (inside an activity)."""
        info = activity.info()
        key = (info.workflow_id or "", info.workflow_run_id or "", info.activity_id)
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else None
        me = _Beating(asyncio.get_running_loop())

        async def beat() -> None:
            while True:
                if time.monotonic() < me.hinted_until:
                    pause = self.floor * min(2**me.hinted_beats, HINTED_CAP)
                    me.hinted_beats += 1
                else:
                    pause = liveness_interval(timeout, self.floor)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(pause):
                        await me.wake.wait()
                me.wake.clear()
                send()

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
"""The process's pace: every worker built in it shares it (`configure`)."""


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
