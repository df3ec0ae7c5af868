"""The cross-process cancel nudge: through the store, from the process whose workflow task
cancels a call to the process running it.

Cancellation reaches a call only in the reply to a heartbeat, and calls heartbeat rarely
(`activities.heartbeat`). The workflow task that cancels a call (an abort, a guidance
interrupt) may run in another worker process, or on another host, than the call. So
that process writes a hint row (`publish`, from the workflow runner, which sees the
cancel command leave), and every worker process reads the new rows in one query per
`TICK_S` while it has calls running, and hints those it runs (`HeartbeatPace.hint_cancel`):
they heartbeat at once and learn of the cancellation from the reply.

Why the store: every worker already reaches it (SQLite on one machine, PostgreSQL across
several), it needs no client change, no new service and no Temporal action (a signal or
an activity per cancel would be one; a query per tick is none). A read per tick costs
the store a primary-key range scan, and only while calls run. PostgreSQL's LISTEN/NOTIFY
would save the idle reads but not the latency, and SQLite has nothing like it.

One thread per channel does both jobs, off the event loop and off the workflow task's
thread (which `publish` never blocks: it only queues). The store being unreachable only
makes cancels as slow as the next liveness heartbeat; nothing fails for it. Hints are
pruned a minute after they were written.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid

from duragent.activities.heartbeat import PACE, CallKey, HeartbeatPace
from duragent.store import cancel_hints
from duragent.store.db import Database

logger = logging.getLogger(__name__)

TICK_S = 0.05
"""How often a process with running calls reads new hints: the cross-process nudge's
latency, on top of the heartbeat round trip."""

KEEP_S = 60.0
"""Hints older than this are pruned (a cancel they were for has long arrived)."""

PRUNE_EVERY_S = 10.0


class CancelHints:
    """The nudge through `db` for the calls of `pace` (see the module); `start` and
    `stop` it with the worker."""

    def __init__(self, db: Database, pace: HeartbeatPace = PACE) -> None:
        self._db = db
        self._pace = pace
        self.origin = uuid.uuid4().hex
        """This channel's name in the rows it writes (it reads every other's)."""
        self._outgoing: queue.SimpleQueue[CallKey | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._after: int | None = None
        self._pruned_at = 0.0

    def publish(self, key: CallKey) -> None:
        """Tell the other processes that `key`'s cancellation is on its way (never
        blocks: the channel's thread writes it)."""
        self._outgoing.put(key)

    def start(self) -> None:
        """Read hints from now on, in a thread of the channel's own (once the store
        answers: hints written before this are not for this process's calls)."""
        try:
            self._mark_start()
        except Exception as err:
            logger.warning("cancel hints: the store did not answer: %s", err)
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="cancel-hints", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            self._outgoing.put(None)  # wakes it
            thread.join(timeout=5)

    def _run(self) -> None:
        next_read = time.monotonic()
        while not self._stopping.is_set():
            timeout = max(0.0, next_read - time.monotonic())
            written = self._take(timeout)
            try:
                if written:
                    self._write(written)
                if time.monotonic() >= next_read:
                    next_read = time.monotonic() + TICK_S
                    self._read()
            except Exception as err:  # the store is down: cancels wait for a heartbeat
                logger.warning("cancel hints: the store did not answer: %s", err)
                self._stopping.wait(1.0)

    def _take(self, timeout: float) -> list[CallKey]:
        """The hints to write: the first one waited for up to `timeout`, then all queued."""
        keys: list[CallKey] = []
        try:
            item = (
                self._outgoing.get(timeout=timeout) if timeout > 0 else self._outgoing.get_nowait()
            )
            while True:
                if item is not None:
                    keys.append(item)
                item = self._next()
        except queue.Empty:
            return keys

    def _next(self) -> CallKey | None:
        return self._outgoing.get_nowait()

    def _write(self, keys: list[CallKey]) -> None:
        now = time.time()
        with self._db.transaction() as db:
            cancel_hints.add_hints(db, keys, self.origin, int(now * 1000))
            if now - self._pruned_at > PRUNE_EVERY_S:
                cancel_hints.prune(db, int((now - KEEP_S) * 1000))
                self._pruned_at = now

    def _mark_start(self) -> None:
        with self._db.transaction() as db:
            self._after = cancel_hints.last_seq(db)

    def _read(self) -> None:
        if self._after is None:  # the store did not answer at the start
            self._mark_start()
            return
        if not self._pace.running():
            return  # nothing to hint: no query (hints since are read once calls run)
        with self._db.transaction() as db:
            hints = cancel_hints.hints_after(db, self._after, self.origin)
        for seq, workflow_id, run_id, activity_id in hints:
            self._after = seq
            self._pace.hint_cancel((workflow_id, run_id, activity_id))
