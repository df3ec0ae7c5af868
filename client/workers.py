"""Workers: the session workflows and every activity they call, wired together.

`build_worker` is the one place that wires the parts together, for the CLI (`duragent
worker`, and the worker `duragent run` starts when none is running), the tests and
embedders alike. It lives in the client, which starts workers, so that the dependency goes
one way: the worker process (`worker.py`) imports the client, never the reverse.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url
from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from duragent.activities.bookkeeping import Bookkeeping
from duragent.activities.budgets import BudgetReads
from duragent.activities.cancel_hints import CancelHints, channel_for
from duragent.activities.extensions import Extension, Extensions
from duragent.activities.guidance_watch import GuidanceWatch
from duragent.activities.heartbeat import PACE
from duragent.activities.hosts import HostActivities, MoveBookkeeping
from duragent.activities.leases import LeaseInterceptor, WorkerLease
from duragent.activities.mcp.config import McpConfigError, load_config
from duragent.activities.mcp.tools import mcp_providers
from duragent.activities.model import Model
from duragent.activities.model_turn import ModelTurns
from duragent.activities.models.clients import ClientOptions, ModelClients, missing_key_notice
from duragent.activities.orphans import ProcessRecords, sweep_records
from duragent.activities.prices import price_table
from duragent.activities.questions import Questions
from duragent.activities.schedules import ScheduledPrompts
from duragent.activities.snapshots import SnapshotTaker
from duragent.activities.subagents import Subagents
from duragent.activities.take_turn import TurnTaker
from duragent.activities.tool_call import ToolCalls
from duragent.activities.tools import BashTool, ToolRegistry, default_tools
from duragent.activities.tools.environment import tool_environment
from duragent.activities.tools.sandbox import BwrapSandbox, SandboxUnavailable
from duragent.activities.tree_ops import TreeOps
from duragent.activities.turn_store import TurnStore
from duragent.client.api import DuragentClient
from duragent.client.connection import connect_when_up
from duragent.client.errors import DuragentError
from duragent.client.facade import SessionFacade
from duragent.client.plugins import Plugin, PluginError, Plugins, load_plugins
from duragent.client.workflow_runner import workflow_runner
from duragent.settings import Settings
from duragent.store.db import Database
from duragent.store.entries import EntryCache
from duragent.store.staging import FinishedReplies
from duragent.telemetry import tracing
from duragent.telemetry.metrics import worker_interceptors, worker_runtime
from duragent.workflows.scheduled_prompt import ScheduledPrompt
from duragent.workflows.session_changes import SessionChanges
from duragent.workflows.session_move import SessionMove
from duragent.workflows.session_run import SessionRun
from duragent.workflows.session_structure import SessionCompaction, SessionNavigation

if TYPE_CHECKING:
    from duragent.client.agent import Agent

logger = logging.getLogger("duragent.worker")


def model_clients(settings: Settings) -> ModelClients:
    """The worker's model clients, one per provider, made as its sessions first name one:
    each provider reached and keyed from its usual variables (`domain.models.PROVIDERS`),
    Anthropic's from `settings`; a provider with neither key nor address goes to the
    offline model when `settings.offline_model_url` names one. Close them when done
    (`await clients.aclose()`); a worker closes the ones it made when it stops."""
    return ModelClients(
        offline_base_url=settings.offline_model_url,
        options=ClientOptions(read_timeout_s=settings.model_read_timeout_s),
        environ=settings.provider_environ(),
    )


def tool_registry(
    settings: Settings, plugins: Sequence[Plugin | Agent[Any, Any]] | Plugins = ()
) -> ToolRegistry:
    """The built-in tools, their commands with the environment and sandbox `settings` ask
    for, the plugins' tools (those `settings` loads and `plugins`), and the tools of the
    MCP servers in `settings.mcp_config` and the plugins (connected on first use).
    Raises `DuragentError` when the sandbox is asked for and cannot run here, or the MCP
    config or a plugin is bad."""
    plugins = _loaded(settings, plugins)
    sandbox = None
    if settings.tool_sandbox == "bwrap":
        try:
            sandbox = BwrapSandbox.create(private_paths(settings))
        except SandboxUnavailable as exc:
            raise DuragentError(str(exc)) from None
    bash = BashTool(env=tool_environment(settings.tool_env), sandbox=sandbox)
    try:
        config = load_config(settings.mcp_config) if settings.mcp_config is not None else None
    except McpConfigError as exc:
        raise DuragentError(str(exc)) from None
    providers = mcp_providers(plugins.mcp_config(config), settings.mcp_logs)
    try:
        return ToolRegistry(
            [*default_tools(bash=bash), *plugins.tools()],
            providers,
            opt_in=plugins.opt_in_tools(),
            opt_in_sources=plugins.agents_servers(),
        )
    except ValueError as exc:  # a plugin's tool named as another tool
        raise PluginError(f"plugins: {exc}") from None


def _loaded(settings: Settings, plugins: Sequence[Plugin | Agent[Any, Any]] | Plugins) -> Plugins:
    """The plugins `settings` load with `plugins` added (loaded already: as they are)."""
    return plugins if isinstance(plugins, Plugins) else load_plugins(settings, plugins)


def private_paths(settings: Settings) -> list[Path]:
    """What no sandboxed command may read, whatever its workspace: the state directory
    (database, dev server, every session's workspace), a SQLite database kept elsewhere,
    the home directory of the worker's user (keys, tokens, other projects) and the key
    the worker proves itself to Temporal with."""
    paths = [settings.home, Path.home()]
    if settings.temporal_tls_client_key is not None:
        paths.append(settings.temporal_tls_client_key)
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        database = Path(url.database)
        paths += [database, *(database.with_name(database.name + s) for s in _SQLITE_SIDECARS)]
    return paths


_SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def build_worker(
    client: Client,
    db: Database,
    settings: Settings,
    *,
    tools: ToolRegistry | None = None,
    models: ModelClients | None = None,
    extensions: Sequence[Extension] = (),
    plugins: Sequence[Plugin | Agent[Any, Any]] | Plugins = (),
) -> Worker:
    """A worker for `settings.task_queue`: the session workflows and their activities,
    with the built-in, plugin and MCP tools (or `tools`), the given extensions' and the
    plugins' hooks (those `settings` loads and `plugins`); and,
    unless workspaces are shared, one for its host's queue (`settings.host_queue`), where
    the tool calls of its host's sessions go. Both run and stop together; when they stop,
    the tools' MCP connections close."""
    plugins = _loaded(settings, plugins)
    registry = tools or tool_registry(settings, plugins)
    bash = registry.get("bash")
    if settings.tool_sandbox != "none" and isinstance(bash, BashTool) and bash.sandbox is None:
        raise DuragentError(
            f"DURAGENT_TOOL_SANDBOX={settings.tool_sandbox}, but the tools given to the worker "
            "run bash unsandboxed: build them with worker.tool_registry(settings)"
        )
    facades = DuragentClient(client, db, settings)
    hooks = Extensions(
        [*extensions, *plugins.extensions()], lambda session_id: SessionFacade(facades, session_id)
    )
    taker = SnapshotTaker(hooks, settings.resources_dir)
    host = None if settings.shared_workspaces else settings.host
    # Entries and paths read by one activity are there for the next: they never change.
    cache = EntryCache()
    bookkeeping = Bookkeeping(db, hooks, taker, host, cache)
    clients = models or model_clients(settings)
    own_model = None if models is not None else clients  # closed when it stops
    if models is None:  # its clients are the settings': say once if they cannot be called
        notice = missing_key_notice(
            settings.model, settings.provider_environ(), settings.offline_model_url
        )
        if notice is not None:
            logger.warning(notice)
        clients.warm(settings.model)
    # Replies the model calls staged, read by the tool calls that follow on this worker.
    replies = FinishedReplies()
    prices = price_table(settings.prices_file)  # turns are priced for budgets
    # A turn's model call: the store's side of it, and asking the model.
    turn_store = TurnStore(db, taker, cache, replies, settings.stream_flush_ms / 1000)
    model_turns = ModelTurns(turn_store, Model(clients), registry, hooks, prices)
    tree = TreeOps(db, clients, cache, prices)
    subagents = Subagents(db, registry)
    questions = Questions(db)
    moves = MoveBookkeeping(db)
    records = ProcessRecords(settings.tool_processes)
    tool_calls = ToolCalls(db, registry, hooks, records, host, replies)
    # A turn is one activity where its session's tools run: a host's worker takes the
    # whole turn, model call included, so it needs the model's settings too.
    turns = TurnTaker(model_turns, tool_calls, GuidanceWatch(db))
    # Calls heartbeat for liveness only, and fast while a cancel is hinted
    # (`activities.heartbeat`): every heartbeat they ask for is to be sent, so the SDK's
    # throttle is the floor of that fast pace. Cancellation reaches an activity in the
    # reply to a heartbeat, so it bounds abort latency (about the throttle plus 5 ms).
    throttle = timedelta(milliseconds=settings.heartbeat_throttle_ms)
    PACE.configure(floor=throttle.total_seconds())
    # The nudge from the process whose workflow task cancels a call to the one running it
    # (PostgreSQL's NOTIFY to one listening connection per worker, SQLite's table).
    hints = channel_for(db, settings.database_listen_url)
    # A lost worker's calls move on once its lease lapses, not its heartbeat timeout.
    lease = (
        WorkerLease(db, client, settings.worker_lease_s, settings.task_queue)
        if settings.worker_lease_s
        else None
    )
    # Metrics when the client's runtime serves them (`telemetry.metrics`), and tracing
    # its client does not bring (a client of `connect_temporal` brings it); else none.
    interceptors = [
        *worker_interceptors(client, settings),
        *tracing.worker_interceptors(client),
        *([LeaseInterceptor(lease)] if lease is not None else []),
    ]
    host_options = (
        host_tool_options(db, settings, tool_calls, turns, throttle, interceptors)
        if settings.host_queue is not None
        else None
    )
    if settings.host_only:  # this host's tool calls, no runs or model calls
        assert host_options is not None  # settings refuse it with shared workspaces
        return SessionWorker(
            registry,
            None,
            records,
            client,
            hints=hints,
            lease=lease,
            own_model=own_model,
            **host_options,
        )
    host_worker = Worker(client, **host_options) if host_options is not None else None
    return SessionWorker(
        registry,
        host_worker,
        records,
        client,
        hints=hints,
        lease=lease,
        own_model=own_model,
        task_queue=settings.task_queue,
        workflows=[
            SessionRun,
            SessionChanges,
            SessionCompaction,
            SessionNavigation,
            SessionMove,
            ScheduledPrompt,
        ],
        activities=[
            bookkeeping.start_run,
            bookkeeping.finish_run,
            bookkeeping.apply_changes,
            bookkeeping.record_events,
            bookkeeping.take_guidance,
            bookkeeping.queue_input,
            model_turns.model_turn,
            turns.take_turn,
            tree.plan_compaction,
            tree.summarize,
            tree.commit_compaction,
            tree.plan_navigation,
            tree.commit_navigation,
            tree.save_turn,
            # Here too: runs of sessions with no host (shared workspaces, and runs that
            # started before hosts were recorded) send their tool calls to this queue.
            tool_calls.run_tool,
            subagents.start_subagent,
            subagents.finish_subagent,
            questions.stage_answer,
            moves.record_host,
            moves.drop_transfer,
            BudgetReads(db, prices).session_spend,
            # A schedule's firing, delivered as the client delivers a person's prompt.
            ScheduledPrompts(facades.schedules.deliver).deliver_scheduled_prompt,
        ],
        # Threads for the sync (store) activities, started as they are needed: they are
        # bounded by the local activities a worker runs at once, not by this.
        activity_executor=ThreadPoolExecutor(max_workers=settings.worker_max_activities),
        max_heartbeat_throttle_interval=throttle,
        default_heartbeat_throttle_interval=throttle,
        # After a worker dies, its cached runs move to another worker this quickly.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        workflow_runner=workflow_runner(hints, converter=client.data_converter),
        interceptors=interceptors,
        **tuning(settings),
    )


def host_tool_options(
    db: Database,
    settings: Settings,
    tool_calls: ToolCalls,
    turns: TurnTaker,
    throttle: timedelta,
    interceptors: Sequence[Interceptor],
) -> dict[str, Any]:
    """The worker of this host's queue (`settings.host_queue`), as a `Worker`'s keyword
    arguments: its sessions' turns and tool calls, and the activities that ask whether
    the host is up and move workspaces (`activities.hosts`)."""
    assert settings.host_queue is not None
    host = HostActivities(settings.host, db)
    return dict(
        task_queue=settings.host_queue,
        activities=[
            turns.take_turn,
            tool_calls.run_tool,
            host.host_ready,
            host.pack_workspace,
            host.unpack_workspace,
        ],
        # Threads for host_ready and the workspace moves, started as they are needed
        # (as many as the bound below, so the SDK sees no bound it could not keep).
        activity_executor=ThreadPoolExecutor(max_workers=settings.worker_max_activities),
        # Tool calls are bounded as the shared queue's calls are (a bound of their own).
        max_concurrent_activities=settings.worker_max_activities,
        max_concurrent_activity_task_polls=settings.worker_pollers,
        max_heartbeat_throttle_interval=throttle,
        default_heartbeat_throttle_interval=throttle,
        # The same as the shared queue's: a tool call is measured wherever it runs.
        interceptors=interceptors,
    )


def tuning(settings: Settings) -> dict[str, Any]:
    """How much one worker takes on at once (settings, "Worker tuning")."""
    return {
        "max_concurrent_activities": settings.worker_max_activities,
        "max_concurrent_workflow_tasks": settings.worker_max_workflow_tasks,
        "max_concurrent_local_activities": settings.worker_max_workflow_tasks,
        "max_cached_workflows": settings.worker_cached_runs,
        "max_concurrent_workflow_task_polls": settings.worker_pollers,
        "max_concurrent_activity_task_polls": settings.worker_pollers,
    }


class SessionWorker(Worker):
    """A Temporal worker and its host's tool worker (if any), run and stopped together
    (`async with`, `run()`, `shutdown()`); once both have stopped it closes its tools'
    connections (MCP servers, their processes) and the model client it made (`own_model`),
    and with them nothing runs any more. While it runs it sweeps this machine's tool
    process records (`activities.orphans`)."""

    def __init__(
        self,
        tools: ToolRegistry,
        host_worker: Worker | None,
        records: ProcessRecords,
        *args: Any,
        hints: CancelHints | None = None,
        lease: WorkerLease | None = None,
        own_model: ModelClients | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._own_model = own_model
        self._tool_registry = tools
        self.host_worker = host_worker
        self._records = records
        self._hints = hints
        self.lease = lease

    async def run(self) -> None:
        sweeping = asyncio.create_task(sweep_records(self._records))
        if self._hints is not None:
            self._hints.start()
        if self.lease is not None:
            await self.lease.start()
        try:
            if self.host_worker is None:
                await super().run()
                return
            # Either one ending (a fatal error, a shutdown) stops the other.
            runs = [asyncio.create_task(super().run()), asyncio.create_task(self.host_worker.run())]
            await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED)
            await self.shutdown()
            for outcome in await asyncio.gather(*runs, return_exceptions=True):
                if isinstance(outcome, BaseException):
                    raise outcome
        finally:
            sweeping.cancel()
            if self.lease is not None:
                await asyncio.to_thread(self.lease.stop)
            if self._hints is not None:
                self._hints.stop()
            await self._tool_registry.aclose()
            if self._own_model is not None:
                await self._own_model.aclose()

    async def shutdown(self) -> None:
        if self.host_worker is None:
            await super().shutdown()
            return
        await asyncio.gather(super().shutdown(), self.host_worker.shutdown())


def settle_worker_process() -> None:
    """Garbage collection for a process that is a worker and nothing else (`duragent
    worker`, `python -m duragent.worker`), called once its modules are loaded.

    What is loaded by then (the SDKs, the models, the workflows) lives as long as the
    process: frozen, full collections no longer walk it (one took 150 ms with the event
    loop stopped). Young collections run every 10,000 allocations instead of 700: a
    worker allocates fast and most of it is gone by the end of its call. Together about
    4 % of a busy worker's CPU; memory is what a few thousand more objects take, at most.
    """
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


async def run_worker(settings: Settings) -> None:
    """Run a worker until cancelled (the CLI cancels on a stop signal); leaving, it shuts
    down: running activities are cancelled, which kills their tool processes."""
    plugins = load_plugins(settings)  # once, for the tools and the hooks
    # A sandbox that cannot run, or a bad plugin, fails before anything starts.
    tools = tool_registry(settings, plugins)
    client, db, settings = await connect_when_up(settings, runtime=worker_runtime(settings))
    try:
        async with build_worker(client, db, settings, tools=tools, plugins=plugins):
            await asyncio.Event().wait()
    finally:
        db.dispose()
