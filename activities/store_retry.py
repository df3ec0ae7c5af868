"""Store writes that outlast a busy or unreachable database.

An activity that has done its work (a model reply streamed, a tool run) must not lose it
because the store is locked for a few seconds or restarting: the write is retried with
backoff inside the activity, which keeps heartbeating meanwhile, instead of failing the
attempt (a new attempt would call the model again, or report a finished tool call as
interrupted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError

from duragent.store.errors import store_trouble

T = TypeVar("T")
logger = logging.getLogger(__name__)
STORE_RETRY_DEADLINE_S = 600.0
"""Give up (and let Temporal retry the activity) after this long."""


async def with_store_retries(write: Callable[[], T], *, what: str) -> T:
    """`write()` in a worker thread, retried while the database is locked or down."""
    started = time.monotonic()
    delay = 0.1
    while True:
        try:
            return await asyncio.to_thread(write)
        except (OperationalError, InterfaceError) as err:
            if time.monotonic() - started > STORE_RETRY_DEADLINE_S:
                raise
            trouble = store_trouble(err)
            logger.warning("%s while %s (%s); retrying in %.1f s", trouble, what, err, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
