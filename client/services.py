"""Start what a command needs when it is not already there: the Temporal dev server, a
worker and, for that worker when there is no API key, the offline model; and, for a
command that follows a run on a worker elsewhere, one of its own when that worker does
not answer. Everything started here stops on exit, also when a signal cancels the command
(`client.lifecycle`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from filelock import AsyncFileLock
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.exc import SQLAlchemyError
from temporalio.api.enums.v1 import (
    PendingActivityState,
    PendingWorkflowTaskState,
    TaskQueueType,
    WorkerStatus,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, ListWorkersRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from duragent.activities.leases import RENEW_S, lease_owner
from duragent.client.connection import connect_temporal, open_store, temporal_reachable
from duragent.client.errors import DuragentError
from duragent.client.home_temporal import at_home_server, running_home_server
from duragent.client.service_users import ServiceUsers
from duragent.domain.models import PROVIDERS, parse_model
from duragent.offline_model import DEMO_SCRIPT, OfflineModelServer
from duragent.settings import Settings
from duragent.store import leases
from duragent.store.db import Database, missing_sqlite_file
from duragent.temporal_dev import DevServer, DevServerError
from duragent.temporal_dev.errors import PortInUseError
from duragent.temporal_dev.ports import split_address
from duragent.temporal_dev.probe import tcp_open
from duragent.temporal_dev.record import DevServerRecord, cluster_id, record_path, write_record

Announce = Callable[[str], None]
LIVE_POLLER_S = 70
"""A worker long-polls at least once a minute; an older poller is presumed gone."""
NO_ANSWER_S = 5.0
"""How long a run's task may wait for the workers elsewhere before the command following
it starts one of its own. A live worker takes a task within milliseconds; one killed
during the run (or one with no lease to tell, killed before) stays among the pollers for
a minute, so only the wait tells it has gone. A busy worker may be this slow too: then
the worker started here only adds hands."""
WATCH_EVERY_S = 1.0
"""How often the watch asks; it lasts the whole run, so once a second, not more."""


def _local_port(address: str) -> int | None:
    host, _, port = address.rpartition(":")
    if host in ("127.0.0.1", "localhost", "[::1]") and port.isdigit():
        return int(port)
    return None


async def has_live_worker(client: Client, settings: Settings) -> bool:
    """Whether a worker polls the task queue now."""
    return bool(await live_workers(client, settings))


async def live_workers(client: Client, settings: Settings) -> list[str]:
    """The identities (`pid@host`) of the workers polling the task queue now.

    The task queue lists every poller of the last minutes, also those of a worker that
    has just stopped (the previous command's), so a poller counts only if it polled
    within `LIVE_POLLER_S`, its worker has not reported shutting down since, and its
    worker lease still renews (`_lapsed`): a worker killed without a word is known dead
    within the lease time. (Without a lease to read, it counts until `LIVE_POLLER_S`.)
    """
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=settings.temporal_namespace,
            task_queue=TaskQueue(name=settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = time.time()
    recent = [p for p in response.pollers if now - _seconds(p.last_access_time) < LIVE_POLLER_S]
    if not recent:
        return []
    stopped = await _stopped_workers(client, settings)
    live = {
        p.identity for p in recent if stopped.get(p.identity, 0.0) < _seconds(p.last_access_time)
    }
    return sorted(live - await _lapsed(settings, live))


async def _lapsed(settings: Settings, identities: set[str]) -> set[str]:
    """Of the pollers `identities`, those whose worker lease (`activities.leases`) stops
    renewing: a worker killed without a word, known within the lease time rather than
    after a minute among the pollers. One whose renewals move is live; a poller with no
    lease (leases off, an older worker), or a store that does not answer, tells nothing:
    it stays live."""
    if not settings.worker_lease_s or not identities:
        return set()
    if missing_sqlite_file(settings.database_url) is not None:
        return set()  # no store: no lease to tell (and none is made by looking)
    db = Database(
        settings.database_url,
        run_migrations=False,
        pool_size=1,
        prepared_statements=settings.database_prepared_statements,
    )

    def read() -> dict[str, int]:
        with db.transaction() as session:
            return leases.leases(session)

    try:
        first = await asyncio.to_thread(read)
        held = {i: [w for w in first if lease_owner(w) == i] for i in identities}
        watched = {i: ids for i, ids in held.items() if ids}
        lapsed: set[str] = set()
        deadline = time.monotonic() + settings.worker_lease_s
        while watched and time.monotonic() < deadline:
            await asyncio.sleep(RENEW_S)
            now = await asyncio.to_thread(read)
            for identity, ids in list(watched.items()):
                if any(now.get(w, first[w]) != first[w] for w in ids):
                    del watched[identity]  # renewed: live
                elif not any(w in now for w in ids):
                    del watched[identity]  # taken for lost by a watcher already
                    lapsed.add(identity)
        return lapsed | set(watched)
    except SQLAlchemyError:
        return set()
    finally:
        db.dispose()


async def _stopped_workers(client: Client, settings: Settings) -> dict[str, float]:
    """Identity -> when it said so, for the task queue's workers that reported shutting
    down (their last worker heartbeat). Empty where the server does not list workers."""
    gone = (WorkerStatus.WORKER_STATUS_SHUTTING_DOWN, WorkerStatus.WORKER_STATUS_SHUTDOWN)
    stopped: dict[str, float] = {}
    request = ListWorkersRequest(
        namespace=settings.temporal_namespace,
        query=f"TaskQueue = {json.dumps(settings.task_queue)}",
    )
    try:
        while True:
            page = await client.workflow_service.list_workers(request)
            for info in page.workers_info:
                beat = info.worker_heartbeat
                if beat.task_queue == settings.task_queue and beat.status in gone:
                    when = _seconds(beat.heartbeat_time)
                    stopped[beat.worker_identity] = max(when, stopped.get(beat.worker_identity, 0))
            if not page.next_page_token:
                return stopped
            request.next_page_token = page.next_page_token
    except RPCError:  # an older server, or worker listing turned off: pollers alone
        return {}


def _seconds(stamp: Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


@contextlib.asynccontextmanager
async def ensure_temporal(settings: Settings, announce: Announce) -> AsyncIterator[Settings]:
    """Temporal for `settings`; yields the settings to reach it with. With no
    `TEMPORAL_ADDRESS` set, that is the home's own dev server, started here when it is not
    running (`client.home_temporal`); with one, Temporal there, or a dev server started
    here when it is a local address that does not answer. Either way this command counts
    among the users of the local services (`client.service_users`) while inside."""
    users = ServiceUsers(settings.home)
    with users.registered():
        if settings.home_dev_server:
            async with home_dev_server(settings, announce, users) as ready:
                yield ready
            return
        if await temporal_reachable(settings):
            yield settings
            return
        async with _dev_server(settings, announce, users):
            yield settings


@contextlib.asynccontextmanager
async def _dev_server(
    settings: Settings, announce: Announce, users: ServiceUsers
) -> AsyncIterator[None]:
    # The dev server speaks no TLS: a TLS address is a cluster's, never one to start here.
    port = None if settings.temporal_tls_on else _local_port(settings.temporal_address)
    if port is None:
        over = " over TLS (check the TEMPORAL_TLS_* settings)" if settings.temporal_tls_on else ""
        raise DuragentError(
            f"Temporal at {settings.temporal_address} is not reachable{over} "
            f"(namespace {settings.temporal_namespace})"
        )
    server = await start_dev_server(settings, announce, port=port, ui_port=settings.web_ui_port)
    try:
        yield
        await users.wait_for_later("the Temporal dev server", announce)
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def home_dev_server(
    settings: Settings, announce: Announce, users: ServiceUsers
) -> AsyncIterator[Settings]:
    """The home's dev server, started here when it is not running (and then stopped on
    leaving, once later commands using it have ended); yields the settings at it."""
    lock = AsyncFileLock(str(settings.home / "temporal-dev.lock"))
    settings.home.mkdir(parents=True, exist_ok=True)
    started: DevServer | None = None
    async with lock:
        running = await running_home_server(settings)
        if running is None:
            started = await _start_home_server(settings, announce)
            try:
                running = at_home_server(settings, await _record(settings, started))
            except BaseException:
                started.stop()
                raise
    try:
        yield running
        if started is not None:  # later commands of the home may use it: not under them
            await users.wait_for_later("the Temporal dev server", announce)
    finally:
        if started is not None:
            started.stop()


async def _record(settings: Settings, server: DevServer) -> DevServerRecord:
    """Record the server just started, so later commands of the home find it."""
    found = await cluster_id(server.address)
    if found is None:
        raise DevServerError(f"the dev server at {server.address} does not tell its cluster id")
    record = DevServerRecord(port=server.port, ui_port=server.ui_port, cluster_id=found)
    write_record(record_path(settings.dev_server_db), record)
    return record


async def _start_home_server(settings: Settings, announce: Announce) -> DevServer:
    """Start the home's dev server: at its recorded port (or the default one) unless
    something else answers there, else at a free port, said with the reason."""
    host, port = split_address(settings.temporal_address)
    ui_port = settings.web_ui_port
    taken = await tcp_open(host, port, 0.5)
    if taken:
        announce(
            f"{settings.temporal_address} is not this folder's Temporal dev server (another "
            "folder's, or one not started by duragent): starting this folder's own on a free "
            "port (set TEMPORAL_ADDRESS to use a server of your choosing)."
        )
    try:
        return await start_dev_server(
            settings, announce, port=None if taken else port, ui_port=None if taken else ui_port
        )
    except PortInUseError:  # taken meanwhile (another folder starting at the same moment)
        return await start_dev_server(settings, announce, port=None, ui_port=None)


async def start_dev_server(
    settings: Settings, announce: Announce, *, port: int | None, ui_port: int | None
) -> DevServer:
    """Start a dev server (with its web UI) on the home's history file, at `port` (None:
    a free one), and say where."""
    server = DevServer(
        settings.dev_server_db,
        port=port,
        ui_port=ui_port,
        headless=False,
        namespace=settings.temporal_namespace,
    )
    await server.astart()
    announce(
        f"Started a Temporal dev server at {server.address} (history in {settings.dev_server_db});"
        f" web UI: {server.ui_url}"
    )
    return server


@contextlib.asynccontextmanager
async def ensure_model(settings: Settings, announce: Announce) -> AsyncIterator[Settings]:
    """When the default model's provider has neither key nor address of its own, serve
    the offline model and point settings at it (every provider without its own, too).

    Only for a worker of this process: the model is called by workers alone.
    """
    if not settings.offline or settings.offline_model_url:
        yield settings
        return
    script = settings.offline_script or DEMO_SCRIPT
    server = OfflineModelServer(script)
    server.start()
    provider = PROVIDERS[parse_model(settings.model).provider]
    model = "Claude" if provider.api == "anthropic-messages" else settings.model
    announce(
        f"No {provider.key_env}: this command's worker uses the offline model, which plays "
        f"scripted replies from {script.name}. It is not {model}; set "
        f"{provider.key_env} (or {provider.base_url_env}) to use it."
    )
    try:
        yield settings.model_copy(update={"offline_model_url": server.base_url})
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def ensure_worker(settings: Settings, announce: Announce) -> AsyncIterator[list[str]]:
    """A worker in this process (with the offline model when there is no API key), unless
    one polls the task queue already: then nothing is started, the model neither, and it
    says which worker it relies on. Yields those workers' identities (none: ours)."""
    client = await connect_temporal(settings)
    elsewhere = await live_workers(client, settings)
    if elsewhere:
        announce(f"Using {_workers(elsewhere)} already polling task queue {settings.task_queue}.")
        yield elsewhere
        return
    async with _own_worker(client, settings, announce):
        yield []


@contextlib.asynccontextmanager
async def stand_in_worker(
    settings: Settings, announce: Announce, workflow_id: str, elsewhere: Sequence[str]
) -> AsyncIterator[None]:
    """While inside, watch the workflow that the workers `elsewhere` (from `ensure_worker`)
    should work on: once a task of it that a worker here would take has waited
    `NO_ANSWER_S` for them, say so and start a worker in this process; it stops on leaving.
    With `elsewhere` empty the worker is this process's own: nothing to watch.

    A failure to start that worker ends what is inside with its error, rather than leaving
    it waiting for a worker that will not come."""
    if not elsewhere:
        yield
        return
    inside = asyncio.current_task()
    assert inside is not None
    watch = asyncio.create_task(_stand_in(settings, announce, workflow_id, elsewhere))

    def on_end(task: asyncio.Task[None]) -> None:
        if _failure(task) is not None:
            inside.cancel()

    watch.add_done_callback(on_end)
    try:
        yield
    except asyncio.CancelledError:
        failure = _failure(watch)
        if failure is None:
            raise
        inside.uncancel()  # that cancel was only the way to stop waiting
        raise failure from None
    finally:
        watch.remove_done_callback(on_end)
        watch.cancel()
        await asyncio.wait([watch])  # its worker, if it started one, has stopped


def _failure(task: asyncio.Task[None]) -> BaseException | None:
    return None if not task.done() or task.cancelled() else task.exception()


async def _stand_in(
    settings: Settings, announce: Announce, workflow_id: str, elsewhere: Sequence[str]
) -> None:
    """Until cancelled: wait for a task of the workflow to go unanswered, then run a worker."""
    client = await connect_temporal(settings)
    handle = client.get_workflow_handle(workflow_id)
    while (waited := await _unanswered_s(handle, settings)) < NO_ANSWER_S:
        await asyncio.sleep(WATCH_EVERY_S)
    announce(
        f"No worker answered for {waited:.0f} s ({_workers(elsewhere)} may have stopped): "
        "starting one in this process."
    )
    async with _own_worker(client, settings, announce):
        await asyncio.Event().wait()


async def _unanswered_s(handle: WorkflowHandle[Any, Any], settings: Settings) -> float:
    """How long the workflow's longest waiting task that a worker of this process would
    take (its workflow task; an activity on the task queue or this host's queue, not
    another host's, whose wait has its own handling) has waited for a worker; 0 if none.

    Only tasks not taken yet count: one taken by a worker that then died comes back to
    the queue when Temporal's timeout for it expires, and counts from then."""
    info = (await handle.describe()).raw_description
    now = time.time()
    waits = [0.0]
    task = info.pending_workflow_task
    if (
        info.HasField("pending_workflow_task")
        and task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
    ):
        waits.append(now - _seconds(task.scheduled_time))
    ours = {settings.task_queue, settings.host_queue}
    for activity in info.pending_activities:
        queue = activity.activity_options.task_queue.name
        if activity.state != PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED or (
            queue and queue not in ours
        ):
            continue
        # A retry waiting out its backoff is scheduled in the future: not waiting yet.
        due = max(_seconds(activity.scheduled_time), _seconds(activity.next_attempt_schedule_time))
        waits.append(now - due)
    return max(waits)


@contextlib.asynccontextmanager
async def _own_worker(
    client: Client, settings: Settings, announce: Announce
) -> AsyncIterator[None]:
    """A worker in this process, with the offline model when there is no API key."""
    # Imported here, not at the top: the wiring loads the model SDK and every activity,
    # which commands that start no worker do not need to wait for.
    from duragent.client.workers import build_worker
    from duragent.telemetry.metrics import worker_runtime

    runtime = worker_runtime(settings)  # its metrics port is bound only for a worker
    if runtime is not None:
        client = await connect_temporal(settings, runtime=runtime)
    async with ensure_model(settings, announce) as with_model:
        db = open_store(with_model)
        try:
            async with build_worker(client, db, with_model):
                announce(f"Started a worker in this process (task queue {settings.task_queue}).")
                yield
                # Later commands may rely on it (`ensure_worker`): not under their runs.
                await ServiceUsers(settings.home).wait_for_later("this worker", announce)
        finally:
            db.dispose()


def _workers(identities: Sequence[str]) -> str:
    """'the worker 1234@host', or 'the workers ...' when there are several."""
    return f"the worker{'s' if len(identities) > 1 else ''} {', '.join(identities)}"


@contextlib.asynccontextmanager
async def local_services(
    settings: Settings, announce: Announce, *, worker: bool = True
) -> AsyncIterator[Settings]:
    """Temporal and (optionally) a worker, started here if missing."""
    async with contextlib.AsyncExitStack() as stack:
        settings = await stack.enter_async_context(ensure_temporal(settings, announce))
        if worker:
            await stack.enter_async_context(ensure_worker(settings, announce))
        yield settings
