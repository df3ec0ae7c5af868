"""Worker leases: a lost worker's calls move on in seconds, with no short heartbeat timeout.

Temporal notices a dead worker's call only when its heartbeat timeout runs out, and a
short timeout takes live calls for lost when an overloaded worker's heartbeats lag. So
each worker process also keeps a lease in the store, renewed every `renew_s` (the lease
time's half, at most `RENEW_S`) from a thread of its own (a busy event loop does not stop
it), and records each model or tool call it runs with its task token (`LeaseInterceptor`)
before the call does anything.

A lease is its own row, renewed on the store's clock (one clock for every machine). The
same round that renews it asks for the leases not renewed for `lease_s`: an indexed read
that finds nothing while every worker is live, so a round costs the same in a fleet of
1,000 as of 2 (one statement on PostgreSQL: an idle worker costs the store one
statement a second at the default 2 s lease), where reading every lease each round
would grow with the square of the fleet. Every worker is a watcher; the first to take a
lapsed lease (a compare-and-delete: one wins) fails each of its calls through Temporal
(a retryable `WorkerLost` error), so the retry policy starts the next attempt at once,
wherever a worker polls. A lost worker's calls move on between `lease_s - renew_s` and
`lease_s + renew_s` after its death (about `lease_s` on average; sooner the more
watchers).

Every call is recorded before it runs (one insert on the worker's store pool; its row is
dropped by the next round after it ends), and the lost worker's rows are failed first.
Then the watcher also asks Temporal: the open runs of the task queue whose calls that
worker's identity started and still runs are failed the same way. That catches a call
begun while the store was held up for its worker (its insert, and the rounds after it,
did not get through before the kill), and calls the rows missed: a host killed and
restarted under load showed some (not yet explained), recovering only by their
heartbeat timeout without it. Temporal's visibility cannot say which worker runs a
pending call, so the sweep describes each open run of the queue: one RPC a run, on each
loss.

A worker taken for lost that comes back (stopped, then continued) cannot finish a call
twice: Temporal rejects the completion of an attempt that already failed. It renews its
lease again and runs new calls as before.

The store unreachable, or a watcher held up (a store slow for everyone, a starved or
stopped process): the others' renewals were likely held up alike, so a watcher judges
nobody until its own rounds have come on time for a whole `lease_s` again; by then every
live worker has renewed. Calls meanwhile recover only by their heartbeat timeout, as
before leases. A worker that cannot reach the store while the others can is taken for
lost (its calls move on).
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

RENEW_S = 1.0
"""How often, at most, a worker renews its lease and asks for the lapsed ones (more
often under a lease time below 2 s: twice a lease time)."""


class WorkerLease:
    """This worker process's lease, and the watch over the others' (see the module)."""

    def __init__(
        self, db: Database, client: Client, lease_s: float, task_queue: str | None = None
    ) -> None:
        # Connections of its own: a worker whose activities hold every pooled connection
        # must not miss its renewals waiting for one (and be taken for lost).
        self._db = own_connections(db)
        self._calls_db = db
        """Where a call is recorded as it begins: the activities' pool (a burst of calls
        beginning must not hold up the renewals)."""
        self._owns_db = self._db is not db
        self._client = client
        self.lease_s = lease_s
        self._task_queue = task_queue
        """Where the runs' workflows are: a lost worker's calls are looked up there too."""
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._started: dict[str, tuple[bytes, str]] = {}
        """Calls begun and not yet recorded: call key -> (task token, activity id)."""
        self._recorded: set[str] = set()
        """Calls recorded as they began (`record`), not yet ended."""
        self._ended: set[str] = set()
        self.renew_s = min(RENEW_S, lease_s / 2)
        self._read_at = 0.0
        """When this watcher's last round came through."""
        self._steady_since: float | None = None
        """Since when its rounds have come on time (None: since the last failed one)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    # The calls: from the activities' event loop, recorded by the lease thread.

    def call_started(self, task_token: bytes, activity_id: str) -> str:
        key = hashlib.sha256(task_token).hexdigest()
        with self._lock:
            self._started[key] = (task_token, activity_id)
        return key

    def record(self, key: str) -> None:
        """Record the call `key` now (from a thread: it waits on the store); if the store
        does not answer, the next round records it."""
        with self._lock:
            call = self._started.get(key)
        if call is None:
            return
        token, activity_id = call
        try:
            with self._calls_db.one_statement() as db:
                leases.add_calls(db, self.worker_id, [(key, token, activity_id)], _now_ms())
        except Exception as err:
            logger.warning("worker lease: call %s recorded later: %s", activity_id, err)
            return
        with self._lock:
            self._started.pop(key, None)
            self._recorded.add(key)

    def call_ended(self, key: str) -> None:
        with self._lock:
            never_stored = self._started.pop(key, None) is not None and key not in self._recorded
            self._recorded.discard(key)
            if not never_stored:  # recorded (as it began, or by a round): drop its row
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
        while not self._stopping.wait(self.renew_s):
            for worker_id, calls in self.tick():
                self._fail(worker_id, calls)

    def tick(self) -> list[tuple[str, list[leases.Call]]]:
        """One round: the lost workers taken, with their calls; none if the store did
        not answer (and then what was seen before is forgotten)."""
        try:
            return self._tick()
        except Exception as err:
            logger.warning("worker lease: %s: %s", store_trouble(err), err)
            self._steady_since = None  # judge nobody until a whole lease time on time
            return []

    def _tick(self) -> list[tuple[str, list[leases.Call]]]:
        """Renew, record the calls begun and ended, and take the leases that lapsed."""
        with self._lock:
            started, self._started = self._started, {}
            ended, self._ended = self._ended, set()
        lease_ms = int(self.lease_s * 1000)
        lapsed = None if started or ended else self._idle_round(lease_ms)
        if lapsed is None:
            try:
                with self._db.transaction() as db:
                    if not leases.renew(db, self.worker_id):
                        logger.info("worker lease %s: (re)taken", self.worker_id)
                    leases.add_calls(
                        db,
                        self.worker_id,
                        [(key, token, activity) for key, (token, activity) in started.items()],
                        _now_ms(),
                    )
                    leases.drop_calls(db, sorted(ended))
                    lapsed = leases.lapsed(db, self.worker_id, lease_ms)
            except Exception:
                with self._lock:  # recorded next round: a running call never goes unrecorded
                    self._started = {**started, **self._started}
                    self._ended |= ended
                raise
        now = time.monotonic()
        if self._steady_since is None or now - self._read_at > self.renew_s + self.lease_s / 4:
            # This watcher itself was held up (a slow store, no CPU, stopped): the others'
            # renewals likely were too. Judge nobody until on time for a lease time.
            self._steady_since = now
        self._read_at = now
        if now - self._steady_since < self.lease_s:
            return []
        lost: list[tuple[str, list[leases.Call]]] = []
        for worker_id, renewals in lapsed:
            with self._db.transaction() as db:
                calls = leases.claim_lost(db, worker_id, renewals)
            if calls is not None:  # None: renewed meanwhile, or another watcher took it
                lost.append((worker_id, calls))
        return lost

    def _idle_round(self, lease_ms: int) -> list[leases.Lease] | None:
        """PostgreSQL with no calls to record: the round as one statement outside a
        transaction (None: not PostgreSQL, or no lease to renew: a round in one)."""
        if self._db.engine.dialect.name != "postgresql":
            return None
        with self._db.engine.connect() as connection:
            auto = connection.execution_options(isolation_level="AUTOCOMMIT")
            return leases.idle_round(auto, self.worker_id, lease_ms)

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


def _now_ms() -> int:
    return int(time.time() * 1000)


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
    return Database(
        db.url, run_migrations=False, pool_size=1, prepared_statements=db.prepared_statements
    )


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
            await asyncio.to_thread(self._lease.record, key)
            return await super().execute_activity(input)
        finally:
            self._lease.call_ended(key)
