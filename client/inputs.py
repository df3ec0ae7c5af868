"""Input for a session (`client.inputs`): steering, follow-ups, the stored input queue and
guidance."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

from temporalio.service import RPCError, RPCStatusCode

from duragent.client.bounds import bounded, one_message
from duragent.client.errors import (
    DuragentError,
    InputQueueFull,
    InvalidPrompt,
    QueueItemNotFound,
    QueueItemNotPending,
    SessionBusy,
    SessionIdle,
)
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.client.run_control import RunHandle
from duragent.domain.guidance import GuidanceIntent, GuidanceItem, classify
from duragent.domain.input import MAX_PENDING_INPUT, PromptInput
from duragent.domain.queues import QueuedMessage
from duragent.store import input_queue
from duragent.store.records import QueueItem
from duragent.workflows.session_run import SessionRun

_START_OR_QUEUE_TRIES = 3
"""Starting, queueing and waiting for a closing run, at most this many times: a run ends
once, and the next one (started for other queued input) takes this input when it starts."""
_CLOSING_WAIT_S = 30.0
"""How long a send waits for the session's workflow to close before trying again: a
closing run's last step, or a compaction or move, which take seconds."""


class SyncInputs(SyncPart):
    """The stored input queue (`client.sync.inputs`): next-turn items, editing and
    deleting pending ones, reading it."""

    def next_turn(self, session_id: str, message: PromptInput) -> QueueItem:
        """Queue a message for the session's next run, inserted before its prompt (seed
        004's nextTurn). Stored, so it waits through restarts; allowed while busy.
        `InputQueueFull` once `MAX_PENDING_INPUT` items wait."""
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            if input_queue.count_pending(db, session_id) >= MAX_PENDING_INPUT:
                raise InputQueueFull(session_id, MAX_PENDING_INPUT)
            return input_queue.add_item(
                db,
                item_id=uuid.uuid4().hex,
                session_id=session_id,
                kind="next_turn",
                message=one_message(message, "queued input"),
            )

    def _queue_while_running(
        self, session_id: str, run_id: str, message: PromptInput, item_id: str
    ) -> QueueItem | None:
        """Queue `message` to start the next run after the open run `run_id`; None when
        that run's end is stored already (`Inputs.queue_for_open_run`)."""
        self._client.sync.sessions.get(session_id)
        try:
            with self._client.db.transaction() as db:
                if input_queue.count_pending(db, session_id) >= MAX_PENDING_INPUT:
                    raise InputQueueFull(session_id, MAX_PENDING_INPUT)
                return input_queue.queue_while_running(
                    db,
                    item_id=item_id,
                    session_id=session_id,
                    run_id=run_id,
                    message=one_message(message, "queued input"),
                )
        except input_queue.RunClosing:  # rolled back: nothing was queued
            return None

    def _mark_guidance(
        self, session_id: str, item_id: str, run_id: str, intent: GuidanceIntent
    ) -> None:
        """Mark a pending item as guidance for `run_id` (`QueueItemNotPending` if taken)."""
        with self._client.db.transaction() as db:
            if not input_queue.guide(db, item_id, run_id, intent):
                raise QueueItemNotPending(item_id, self.item(session_id, item_id).status)

    def _release_guidance(self, run_id: str) -> None:
        with self._client.db.transaction() as db:
            input_queue.release_guidance(db, run_id)

    def edit(self, session_id: str, item_id: str) -> str:
        """Take an item back to edit it: it is cancelled and its text returned."""
        self._cancel_item(session_id, item_id)
        return self.item(session_id, item_id).text

    def delete(self, session_id: str, item_id: str) -> None:
        self._cancel_item(session_id, item_id)

    def _cancel_item(self, session_id: str, item_id: str) -> None:
        item = self.item(session_id, item_id)
        with self._client.db.transaction() as db:
            if not input_queue.cancel(db, item_id):
                raise QueueItemNotPending(item_id, item.status)

    def queue(self, session_id: str, *, status: str | None = "pending") -> list[QueueItem]:
        """The session's input queue: its items with `status` (None: all), oldest first."""
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return input_queue.list_items(db, session_id, status=status)

    def item(self, session_id: str, item_id: str) -> QueueItem:
        """One item of the session's input queue; `QueueItemNotFound` for another id."""
        with self._client.db.transaction() as db:
            item = input_queue.get_item(db, item_id)
        if item is None or item.session_id != session_id:
            raise QueueItemNotFound(session_id, item_id)
        return item

    def next_turn_items(self, session_id: str) -> list[QueueItem]:
        """next_turn messages still waiting for a run."""
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return input_queue.list_items(db, session_id, kind="next_turn")


class Inputs(StoreBackedPart[SyncInputs]):
    """What a user sends a session besides a prompt, and the queue it waits in."""

    next_turn = in_thread(SyncInputs.next_turn)
    edit = in_thread(SyncInputs.edit)
    delete = in_thread(SyncInputs.delete)
    queue = in_thread(SyncInputs.queue)
    item = in_thread(SyncInputs.item)
    next_turn_items = in_thread(SyncInputs.next_turn_items)

    async def steer(
        self, session_id: str, message: PromptInput, *, item_id: str | None = None
    ) -> str:
        """Queue a message for the open run: it reaches the model after the current turn's
        tool calls have all finished. Returns the item id (resend with it: delivered once)."""
        return await self._queue(session_id, message, item_id, SessionRun.steer, "steer")

    async def follow_up(
        self, session_id: str, message: PromptInput, *, item_id: str | None = None
    ) -> str:
        """Queue a message for when the open run's agent would otherwise stop."""
        return await self._queue(session_id, message, item_id, SessionRun.follow_up, "follow up")

    async def _queue(
        self,
        session_id: str,
        message: PromptInput,
        item_id: str | None,
        signal: Any,
        what: str,
    ) -> str:
        message_what = "steering message" if what == "steer" else f"{what} message"
        item = QueuedMessage(
            id=item_id or uuid.uuid4().hex, message=one_message(message, message_what)
        )
        handle = await self._client.workflows.open_run(session_id)
        if handle is None:
            raise SessionIdle(session_id, what)
        try:
            await handle.signal(signal, item)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise SessionIdle(session_id, what) from err
            raise
        return item.id

    async def send(
        self,
        session_id: str,
        text: str,
        *,
        guidance: bool = False,
        intent: GuidanceIntent | None = None,
    ) -> RunHandle | QueueItem:
        """What a chat box does: an idle session starts a run. Input sent while a run is
        open waits in the queue (a pending item, which its sender may still edit, delete
        or turn into guidance) and starts the next run when that one ends, that run taking
        all the input that waited; with `guidance`, it goes to the open run instead (with
        `intent`, or the one its wording suggests). Never cancels or interrupts a run."""
        if intent is not None and not guidance:
            raise InvalidPrompt("an intent is for guidance: send it with guidance")
        if guidance:
            return await self.guide_text(session_id, text, intent=intent)
        return await self.start_or_queue(session_id, text)

    async def start_or_queue(
        self,
        session_id: str,
        message: PromptInput,
        *,
        item_id: str | None = None,
        run_id: str | None = None,
    ) -> RunHandle | QueueItem:
        """Start a run of `message` (as `run_id`, if given), or, while a run is open, queue
        it to start the next run when that one ends (`send`). Sent again with the same
        `item_id` and `run_id` (a retried delivery), it is started or queued once.

        A run whose end is stored already takes no more input: then this waits for its
        workflow to close and starts the next run itself; so does a session busy with
        what is no run (a compaction, a move), once that is over. Every piece of input
        accepted here is run once, by the open run's successor or by a run started here."""
        item_id = item_id or uuid.uuid4().hex
        busy: SessionBusy | None = None
        for _ in range(_START_OR_QUEUE_TRIES):
            try:
                return await self._client.runs.prompt(session_id, message, run_id=run_id)
            except SessionBusy as err:
                busy = err
            if run_id is not None and busy.run_id == run_id:  # started by an earlier try
                return self._client.runs.handle(session_id, run_id)
            queued = await self.queue_for_open_run(session_id, busy, message, item_id)
            if queued is not None:
                return queued
            await self._client.workflows.wait_closed(session_id, _CLOSING_WAIT_S)
        assert busy is not None
        raise busy

    async def deliver_once(
        self, session_id: str, message: PromptInput, *, run_id: str, item_id: str
    ) -> RunHandle | QueueItem:
        """`start_or_queue` for input its sender may send again (a webhook's delivery, a
        schedule's firing): `run_id` and `item_id` are fixed by the sender's own id for
        it, so a resend finds the run the first send started, or the item it queued (in
        whatever state it is now), instead of sending it twice."""
        if (started := await self._client.runs.get(run_id)) is not None:
            return self._client.runs.handle(started.session_id, run_id)
        with contextlib.suppress(QueueItemNotFound):
            return await self.item(session_id, item_id)
        return await self.start_or_queue(session_id, message, item_id=item_id, run_id=run_id)

    async def queue_for_open_run(
        self, session_id: str, busy: SessionBusy, message: PromptInput, item_id: str
    ) -> QueueItem | None:
        """Queue `message` to start the next run after the open run `busy` names; None
        when the session is busy with what is no run, or when that run's end is stored
        already (it takes nothing more: `store.input_queue.queue_while_running`).
        `InputQueueFull` once `MAX_PENDING_INPUT` items wait."""
        if busy.run_id is None:
            return None
        return await asyncio.to_thread(
            self._store._queue_while_running, session_id, busy.run_id, message, item_id
        )

    async def guide_text(
        self, session_id: str, text: str, *, intent: GuidanceIntent | None = None
    ) -> QueueItem:
        """New text as guidance for the run in progress (queued, then guided). When the
        run cannot take it (`SessionIdle`: none is open), nothing is kept: it was meant for
        this run, not the next one."""
        if await self._client.workflows.open_run(session_id) is None:
            raise SessionIdle(session_id, "take guidance")  # nothing stored, not even cancelled
        item = await self.next_turn(session_id, text)
        try:
            return await self.guide(session_id, item.id, intent=intent)
        except DuragentError:
            with contextlib.suppress(DuragentError):
                await self.delete(session_id, item.id)
            raise

    async def guide(
        self, session_id: str, item_id: str, *, intent: GuidanceIntent | None = None
    ) -> QueueItem:
        """Turn a pending item into guidance for the session's run in progress; the run
        takes it at its nearest safe point. Guiding the same item twice delivers it once."""
        item = await self.item(session_id, item_id)
        bounded("guidance", item.text)  # items queued before the limit held may be larger
        handle = await self._client.workflows.open_run(session_id)
        run_id = await self._client.workflows.run_id(handle) if handle else None
        if handle is None or run_id is None:
            raise SessionIdle(session_id, "take guidance")
        guidance = GuidanceItem(id=item.id, text=item.text, intent=intent or classify(item.text))
        # Marked (with its intent) before the signal: a turn running its tools in one
        # activity takes it from the store, possibly before the workflow has the signal.
        # Guided again: marked already, maybe taken already; the run takes it once.
        if not (item.kind == "guidance" and item.run_id == run_id and item.status != "cancelled"):
            await asyncio.to_thread(
                self._store._mark_guidance, session_id, item_id, run_id, guidance.intent
            )
        try:
            await handle.signal(SessionRun.guidance, guidance)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            # The run ended meanwhile: keep the input.
            await asyncio.to_thread(self._store._release_guidance, run_id)
            raise SessionIdle(session_id, "take guidance") from err
        return await self.item(session_id, item_id)
