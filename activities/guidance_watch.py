"""Runtime guidance for the turns whose tools run in this process, read from the store.

A turn taken in one activity (`activities.take_turn`) runs its tool calls where no
workflow sees them, so guidance sent meanwhile must reach the activity itself. The
client marks an item as guidance for the run (with its intent) in the store before it
signals the workflow; this watch reads the pending items of every watched run in one
query per `TICK_S` while any turn runs tools here, and wakes the turns that have some.
A turn takes an item with the same compare-and-set the workflow uses
(`input_queue.take_guidance`), so an item is acted on once, and never after it was
edited or deleted. The store being unreachable only delays guidance to the turn's end,
where the workflow takes what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from duragent.domain.guidance import GuidanceItem
from duragent.store import input_queue
from duragent.store.db import Database
from duragent.store.statements import Tx

logger = logging.getLogger(__name__)

TICK_S = 0.05
"""How often pending guidance is read while turns run tools: guidance's latency."""


@dataclass
class RunGuidance:
    """The pending guidance of one run, as last read."""

    session_id: str
    run_id: str
    pending: list[GuidanceItem] = field(default_factory=list)
    interrupting: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while `pending` holds an item that interrupts."""

    def update(self, pending: list[GuidanceItem]) -> None:
        """`pending` as last read (or what is left of it once some were taken)."""
        self.pending = pending
        if any(item.intent == "interrupt" for item in pending):
            self.interrupting.set()
        else:
            self.interrupting.clear()


class GuidanceWatch:
    """Reads pending guidance for the watched runs (see the module)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._runs: dict[int, RunGuidance] = {}
        self._poller: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def watching(self, session_id: str, run_id: str) -> AsyncIterator[RunGuidance]:
        """`run_id`'s pending guidance, kept current while the block runs."""
        run = RunGuidance(session_id, run_id)
        self._runs[id(run)] = run
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll(), name="guidance-watch")
        try:
            yield run
        finally:
            del self._runs[id(run)]

    async def read(self, run: RunGuidance) -> list[GuidanceItem]:
        """`run`'s pending guidance now (one query)."""
        await self._read([run])
        return run.pending

    @staticmethod
    def pending_in(db: Tx, session_id: str, run_id: str) -> list[GuidanceItem]:
        """The run's pending guidance, read in `db`'s transaction (one that a turn has
        open anyway: see `TurnTaker`)."""
        return _of_run(input_queue.pending_guidance(db, {session_id}), run_id)

    async def take(self, run: RunGuidance, items: list[GuidanceItem]) -> list[GuidanceItem]:
        """The `items` the store lets `run` take (each at most once, across processes)."""

        def take() -> list[str]:
            with self._db.transaction() as db:
                return input_queue.take_guidance(db, run.run_id, [i.id for i in items])

        taken = set(await asyncio.to_thread(take))
        asked = {item.id for item in items}
        run.update([item for item in run.pending if item.id not in asked])
        return [item for item in items if item.id in taken]

    async def _poll(self) -> None:
        # A turn reads once itself before its calls start (`pending_in` as it stages its
        # reply, or `read`): the first poll is a tick later, so calls that end sooner
        # cost no query of the watch's.
        await asyncio.sleep(TICK_S)
        while self._runs:
            try:
                await self._read(list(self._runs.values()))
            except Exception as err:  # the store is down: the workflow takes it later
                logger.warning("guidance watch: the store did not answer: %s", err)
            await asyncio.sleep(TICK_S)

    async def _read(self, runs: list[RunGuidance]) -> None:
        sessions = {run.session_id for run in runs}

        def read() -> list[tuple[str | None, GuidanceItem]]:
            with self._db.statements() as db:
                return input_queue.pending_guidance(db, sessions)

        found = await asyncio.to_thread(read)
        for run in runs:
            run.update(_of_run(found, run.run_id))


def _of_run(found: list[tuple[str | None, GuidanceItem]], run_id: str) -> list[GuidanceItem]:
    return [item for bound_to, item in found if bound_to == run_id]
