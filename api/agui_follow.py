"""Which duragent run's end is an AG-UI run's end (`api/routes_agui.py`).

An AG-UI run tells a session's stored events from a cursor, and the runs it meets end in
turn. Which end is its own depends on how it began:

- an input that started a run (the session was idle): that run's end (`RunFollow`);
- an input queued while a run was busy: the end of the run that takes it (`InputFollow`),
  usually the `queued` run the busy one starts when it ends (docs/SPEC.md, "Accepted
  input always runs"), else a later one (a run a person starts takes it too). Ends of
  other runs pass by. When the item is cancelled before a run takes it (Stop cancels the
  input that waits; an edit or a delete takes it back), the AG-UI run ends then,
  cancelled, and says why;
- a watch, or a resume: the end of the run it follows, unless that run's end starts the
  next run for input that waited (a continue-as-new of the session's workflow: the
  session stays busy in between): then it goes on into that run (`ChainFollow`), and
  ends with the run the chain ends with. So a watch resuming a dropped input's stream
  from its last id gets the answer to that input too.

The end a run passes by is told as a `CUSTOM` `duragent.agent_end` and the state's
`phase` going `idle`; the next run's `agent_start` sets the state's `run_id`. A wait for
a person ends the AG-UI run with its interrupts whichever run waits (`api/agui_waits.py`).

How long one waits: for as long as the client keeps the stream. A client that goes away
ends it (the server stops at once: nothing is lost, the events are stored, and a watch
from the last id tells the rest); a long busy run before the queued one is followed
with keep-alives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from duragent.client.api import DuragentClient
from duragent.store.records import QueueItem, StoredEvent

CHECK_S = 0.5
"""How often, at most, a follow reads what it waits on while no event tells it."""
STOPPED = (
    "the session's run was stopped before a run took this input: Stop cancels the input that waits"
)
WITHDRAWN = "this input was taken back (edited or deleted) before a run took it"


@dataclass(frozen=True)
class Ending:
    """What a run's end (or a check) means for the AG-UI run."""

    kind: Literal["finish", "pass", "hold", "cancelled"]
    """`finish`: its end; `pass`: not its end, it goes on; `hold`: not its end if the
    next run starts (`ChainFollow`), else the end after all; `cancelled`: the input it
    follows was cancelled, it ends now."""
    item_id: str | None = None
    reason: Literal["stopped", "withdrawn"] | None = None

    @property
    def why(self) -> str:
        return STOPPED if self.reason == "stopped" else WITHDRAWN


FINISH = Ending("finish")
PASS = Ending("pass")
HOLD = Ending("hold")


class Follow:
    """Ends with the first run's end (a `RunFollow` whose run is not known)."""

    def observe(self, event: StoredEvent) -> None:
        """Learn from an event as it is read (before it is told)."""

    async def at_end(self, client: DuragentClient, session_id: str, end: StoredEvent) -> Ending:
        """What the run's end `end` (its `agent_end`) is to the AG-UI run."""
        return FINISH

    async def check(self, client: DuragentClient, session_id: str, position: int) -> Ending | None:
        """While it goes on: an end that no event tells (None: go on). `position` is the
        seq of the last event told."""
        return None


class RunFollow(Follow):
    """Ends with the end of the run `run_id` (the run an input started)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    async def at_end(self, client: DuragentClient, session_id: str, end: StoredEvent) -> Ending:
        return FINISH if end.run_id == self.run_id else PASS


class InputFollow(Follow):
    """Ends with the end of the run that takes the queue item `item_id`, or when the item
    is cancelled before a run takes it."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        self.run_id: str | None = None
        """The run that took it, once known."""
        self._checked = 0.0

    def observe(self, event: StoredEvent) -> None:
        p = event.payload
        if event.type == "queue_consumed" and p.get("entry_id") == self.item_id:
            self.run_id = event.run_id
        elif event.type == "runtime_guidance_injected" and self.item_id in p.get("item_ids", []):
            self.run_id = event.run_id  # made guidance for the busy run, which took it

    async def at_end(self, client: DuragentClient, session_id: str, end: StoredEvent) -> Ending:
        if self.run_id is None:
            item = await self._item(client, session_id)
            if item.status == "cancelled":
                stopped = end.payload.get("status") == "aborted"
                return Ending("cancelled", self.item_id, "stopped" if stopped else "withdrawn")
            self._learn(item)
        return FINISH if end.run_id is not None and end.run_id == self.run_id else PASS

    async def check(self, client: DuragentClient, session_id: str, position: int) -> Ending | None:
        if self.run_id is not None or time.monotonic() - self._checked < CHECK_S:
            return None  # taken: the run's events tell the rest
        self._checked = time.monotonic()
        item = await self._item(client, session_id)
        self._learn(item)
        if item.status != "cancelled":
            return None
        if await client.events.cursor(session_id) > position:
            return None  # events not told yet (a stop's end among them): they say why
        return Ending("cancelled", self.item_id, "withdrawn")

    def _learn(self, item: QueueItem) -> None:
        if item.status == "consumed":
            self.run_id = item.run_id

    async def _item(self, client: DuragentClient, session_id: str) -> QueueItem:
        return await client.inputs.item(session_id, self.item_id)


class ChainFollow(Follow):
    """Ends with a run's end, unless that end starts the next run for input that waited:
    then with that run's (and so on)."""

    def __init__(self) -> None:
        self.held: str | None = None
        """The run whose end waits for the run it starts."""
        self._checked = 0.0

    def observe(self, event: StoredEvent) -> None:
        if event.type == "agent_start" and event.run_id != self.held:
            self.held = None  # the next run started: the AG-UI run goes on into it

    async def at_end(self, client: DuragentClient, session_id: str, end: StoredEvent) -> Ending:
        if end.run_id is None or end.payload.get("status") == "aborted":
            return FINISH  # a stopped run starts none (its waiting input is cancelled)
        if await self._input_waits(client, session_id) or await self._next_queued(
            client, session_id, end.run_id
        ):
            self.held = end.run_id
            self._checked = time.monotonic()
            return HOLD
        return FINISH

    async def check(self, client: DuragentClient, session_id: str, position: int) -> Ending | None:
        if self.held is None or time.monotonic() - self._checked < CHECK_S:
            return None
        self._checked = time.monotonic()
        # The next run has started (its events come), or input waits for it and the
        # session's workflow, continuing as new, will start it; else none comes (the input
        # was taken back, or a stop came before the next run started).
        waits = await self._input_waits(client, session_id)
        if waits and await client.workflows.open_type(session_id) is not None:
            return None
        if await self._next_run(client, session_id, self.held) is not None:
            return None
        return FINISH

    @staticmethod
    async def _input_waits(client: DuragentClient, session_id: str) -> bool:
        queue = await client.inputs.queue(session_id)
        return any(item.kind == "next_turn" and item.starts_run for item in queue)

    async def _next_queued(self, client: DuragentClient, session_id: str, run_id: str) -> bool:
        # Read after the queue: a run that took the input was recorded before it took it.
        later = await self._next_run(client, session_id, run_id)
        return later is not None and later == "queued"

    @staticmethod
    async def _next_run(client: DuragentClient, session_id: str, run_id: str) -> str | None:
        """The kind of the run that started after `run_id`, if one has."""
        runs = await client.runs.list(session_id)  # newest first
        at = next((i for i, run in enumerate(runs) if run.run_id == run_id), None)
        return runs[at - 1].kind if at else None
