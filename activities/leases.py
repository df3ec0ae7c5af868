"""Worker leases: a lost worker's calls move on in seconds, with no short heartbeat timeout.

Temporal notices a dead worker's call only when its heartbeat timeout runs out, and a
short timeout takes live calls for lost when an overloaded worker's heartbeats lag. So
each worker process also keeps a lease in the store, renewed every `RENEW_S` from a
thread of its own (a busy event loop does not stop it), and records each model or tool
call it runs with its task token (`LeaseInterceptor`). Every worker watches the others'
leases in the same thread: one whose renewals stop changing for `lease_s`, as seen on
the watcher's own clock (no two machines' clocks are compared), is lost. The first
watcher to take its lease (a compare-and-delete: one wins) fails each of its calls
through Temporal (a retryable `WorkerLost` error), so the retry policy starts the next
attempt at once, wherever a worker polls. A call the lost worker began but had not yet
recorded (its last rounds did not commit: a store held up, a call begun just before the
kill) is found in Temporal instead: the open runs' calls started by that worker's
identity and still running are failed the same way.

A worker taken for lost that comes back (stopped, then continued) cannot finish a call
twice: Temporal rejects the completion of an attempt that already failed. It renews its
lease again and runs new calls as before.

The store unreachable: a watcher that cannot read the leases judges nobody, and forgets
what it saw, so each lease gets a whole `lease_s` after the store is back; calls then
recover only by their heartbeat timeout, as before leases. So does a watcher whose own
reads were held up (a store slow for everyone, a starved or stopped process): a lease is
judged only over reads that came on time. A worker that cannot reach the store while
the others can is taken for lost (its calls move on).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from sqlalchemy.engine import make_url
from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import AsyncActivityHandle, Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from duragent.domain.turns import WORKER_LOST
from duragent.store import leases
from duragent.store.db import Database
from duragent.store.errors import store_trouble

logger = logging.getLogger(__name__)

RENEW_S = 0.15
"""How often a worker renews its lease and looks at the others'."""


class WorkerLease:
    """This worker process's lease, and the watch over the others' (see the module)."""

    def __init__(
        self, db: Database, client: Client, lease_s: float, task_queue: str | None = None
    ) -> None:
        # Connections of its own: a worker whose activities hold every pooled connection
        # must not miss its renewals waiting for one (and be taken for lost).
        self._db = own_connections(db)
        self._owns_db = self._db is not db
        self._client = client
        self.lease_s = lease_s
        self._task_queue = task_queue
        """Where the runs' workflows are: their unrecorded calls are looked up there."""
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._started: dict[str, tuple[bytes, str]] = {}
        """Calls begun and not yet recorded: call key -> (task token, activity id)."""
        self._ended: set[str] = set()
        self._seen: dict[str, tuple[int, float]] = {}
        """Another worker's lease -> (renewals, when this watcher first saw that count)."""
        self._read_at = 0.0
        """When this watcher last read the leases."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # The calls: from the activities' event loop, recorded by the lease thread.

    def call_started(self, task_token: bytes, activity_id: str) -> str:
        key = hashlib.sha256(task_token).hexdigest()
        with self._lock:
            self._started[key] = (task_token, activity_id)
        return key

    def call_ended(self, key: str) -> None:
        with self._lock:
            if self._started.pop(key, None) is None:  # recorded already: drop its row
                self._ended.add(key)

    # The thread.

    async def start(self) -> None:
        """Take the lease, then keep it in a thread. Taken before the worker polls: a
        worker killed within its first round would otherwise have run calls under no
        lease, and only their heartbeat timeout would move them on."""
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._stopping.clear()
            await asyncio.to_thread(self.tick)
            self._thread = threading.Thread(target=self._run, name="worker-lease", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop renewing; the lease and call rows go (a clean stop is no loss)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping.set()
        thread.join(timeout=5)
        try:
            with self._db.transaction() as db:
                leases.drop_worker(db, self.worker_id)
        except Exception as err:  # they lapse, and fail nothing: the calls have ended
            logger.warning("worker lease: could not remove %s: %s", self.worker_id, err)
        if self._owns_db:
            self._db.dispose()

    def _run(self) -> None:
        while not self._stopping.wait(RENEW_S):
            for worker_id, calls in self.tick():
                self._fail(worker_id, calls)

    def tick(self) -> list[tuple[str, list[leases.Call]]]:
        """One round: the lost workers taken, with their calls; none if the store did
        not answer (and then what was seen before is forgotten)."""
        try:
            return self._tick()
        except Exception as err:
            logger.warning("worker lease: %s: %s", store_trouble(err), err)
            self._seen.clear()  # judge nobody on what was seen before the gap
            return []

    def _tick(self) -> list[tuple[str, list[leases.Call]]]:
        """Renew, record the calls begun and ended, and take the leases that lapsed."""
        with self._lock:
            started, self._started = self._started, {}
            ended, self._ended = self._ended, set()
        try:
            with self._db.transaction() as db:
                if not leases.renew(db, self.worker_id, int(time.time() * 1000)):
                    logger.info("worker lease %s: (re)taken", self.worker_id)
                leases.add_calls(
                    db,
                    self.worker_id,
                    [(key, token, activity_id) for key, (token, activity_id) in started.items()],
                    int(time.time() * 1000),
                )
                leases.drop_calls(db, sorted(ended))
                current = leases.leases(db)
        except Exception:
            with self._lock:  # recorded next round: a running call never goes unrecorded
                self._started = {**started, **self._started}
                self._ended |= ended
            raise
        now = time.monotonic()
        if now - self._read_at > self.lease_s / 2:
            # This watcher itself was held up (a slow store, no CPU, stopped): what it
            # saw before may be stale, and the others were likely held up alike.
            self._seen.clear()
        self._read_at = now
        lost: list[tuple[str, list[leases.Call]]] = []
        self._seen = {w: s for w, s in self._seen.items() if w in current}
        for worker_id, renewals in current.items():
            if worker_id == self.worker_id:
                continue
            seen = self._seen.get(worker_id)
            if seen is None or seen[0] != renewals:
                self._seen[worker_id] = (renewals, now)
            elif now - seen[1] >= self.lease_s:
                del self._seen[worker_id]
                with self._db.transaction() as db:
                    calls = leases.claim_lost(db, worker_id, renewals)
                lost.append((worker_id, calls))
        return lost

    def _fail(self, worker_id: str, calls: Sequence[leases.Call]) -> None:
        """Fail the lost worker's calls through Temporal (on the event loop)."""
        if self._loop is None:
            return
        logger.warning(
            "worker %s lost (its lease lapsed): failing its %d call(s)", worker_id, len(calls)
        )
        future = asyncio.run_coroutine_threadsafe(self._move_on(worker_id, calls), self._loop)
        future.add_done_callback(_log_failure)

    async def _move_on(self, worker_id: str, calls: Sequence[leases.Call]) -> None:
        """Fail the recorded calls, then those Temporal says the worker still runs."""
        for _, token, activity_id in calls:
            handle = self._client.get_async_activity_handle(task_token=token)
            await self._fail_one(worker_id, handle, activity_id)
        if self._task_queue is not None:
            # After the recorded ones: those are retrying by now, no longer "started".
            await self._fail_unrecorded(worker_id, self._task_queue)

    async def _fail_unrecorded(self, worker_id: str, task_queue: str) -> None:
        identity = lease_owner(worker_id)
        query = f"ExecutionStatus = 'Running' AND TaskQueue = '{task_queue}'"
        async for run in self._client.list_workflows(query):
            try:
                described = await self._client.get_workflow_handle(
                    run.id, run_id=run.run_id
                ).describe()
            except RPCError:
                continue  # ended meanwhile
            for pending in described.raw_description.pending_activities:
                if pending.state in _RUNNING and pending.last_worker_identity == identity:
                    handle = self._client.get_async_activity_handle(
                        workflow_id=run.id, run_id=run.run_id, activity_id=pending.activity_id
                    )
                    await self._fail_one(worker_id, handle, pending.activity_id)

    async def _fail_one(
        self, worker_id: str, handle: AsyncActivityHandle, activity_id: str
    ) -> None:
        # Retryable: the call's retry policy starts the next attempt at once. (Temporal
        # takes only application failures from a client, not a heartbeat timeout.)
        error = ApplicationError(f"worker lost: its lease lapsed ({worker_id})", type=WORKER_LOST)
        try:
            await handle.fail(error)
        except RPCError as err:  # it ended meanwhile (or its run did): nothing to move on
            logger.warning("worker lost: call %s not failed: %s", activity_id, err)


_RUNNING = (
    PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
    PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,  # an abort waits on it
)


def lease_owner(worker_id: str) -> str:
    """The Temporal identity (`pid@host`, the SDK's default) of the worker process that
    holds the lease `worker_id`."""
    host, pid, _ = worker_id.rsplit(":", 2)
    return f"{pid}@{host}"


def own_connections(db: Database) -> Database:
    """The same store through a small pool of its own (an in-memory SQLite database is
    only reachable through its own engine: then `db` itself)."""
    url = make_url(db.url)
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        return db
    return Database(db.url, run_migrations=False, pool_size=1)


def _log_failure(future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("worker lost: failing a call raised %r", future.exception())


class LeaseInterceptor(Interceptor):
    """Records each heartbeating call (a model or tool call) under the worker's lease
    while it runs."""

    def __init__(self, lease: WorkerLease) -> None:
        self._lease = lease

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _LeasedActivity(next, self._lease)


class _LeasedActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, lease: WorkerLease) -> None:
        super().__init__(next)
        self._lease = lease

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.is_local or info.heartbeat_timeout is None:
            return await super().execute_activity(input)  # no heartbeats: nothing to fail
        key = self._lease.call_started(info.task_token, info.activity_id)
        try:
            return await super().execute_activity(input)
        finally:
            self._lease.call_ended(key)
