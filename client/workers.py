"""Workers: the session workflows and every activity they call, wired together.

`build_worker` is the one place that wires the parts together, for the CLI (`duragent
worker`, and the worker `duragent run` starts when none is running), the tests and
embedders alike. It lives in the client, which starts workers, so that the dependency goes
one way: the worker process (`worker.py`) imports the client, never the reverse.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
from sqlalchemy.engine import make_url
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.bookkeeping import Bookkeeping
from activities.extensions import Extension, Extensions
from activities.mcp.config import McpConfigError, load_config
from activities.mcp.tools import mcp_providers
from activities.model_turn import ModelTurns
from activities.orphans import ProcessRecords
from activities.snapshots import SnapshotTaker
from activities.subagents import Subagents
from activities.tool_call import ToolCalls
from activities.tools import BashTool, ToolRegistry, default_tools
from activities.tools.environment import tool_environment
from activities.tools.sandbox import BwrapSandbox, SandboxUnavailable
from activities.tree_ops import TreeOps
from client.api import DuragentClient
from client.connection import connect_temporal, open_store
from client.errors import DuragentError
from client.facade import SessionFacade
from settings import Settings
from store.db import Database
from store.entries import EntryCache
from telemetry import tracing
from workflows.session_changes import SessionChanges
from workflows.session_run import SessionRun
from workflows.session_structure import SessionCompaction, SessionNavigation


def model_client(settings: Settings) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key=settings.anthropic_api_key or "offline",
        base_url=settings.anthropic_base_url,
        # Retries are the workflow's, where they are visible and abortable.
        max_retries=0,
        timeout=anthropic.Timeout(
            connect=10.0, read=settings.model_read_timeout_s, write=30.0, pool=10.0
        ),
    )


def tool_registry(settings: Settings) -> ToolRegistry:
    """The built-in tools, their commands with the environment and sandbox `settings` ask
    for, and the tools of the MCP servers in `settings.mcp_config` (connected on first use).
    Raises `DuragentError` when the sandbox is asked for and cannot run here, or the MCP
    config is bad."""
    sandbox = None
    if settings.tool_sandbox == "bwrap":
        try:
            sandbox = BwrapSandbox.create(private_paths(settings))
        except SandboxUnavailable as exc:
            raise DuragentError(str(exc)) from None
    bash = BashTool(env=tool_environment(settings.tool_env), sandbox=sandbox)
    providers = []
    if settings.mcp_config is not None:
        try:
            providers = mcp_providers(load_config(settings.mcp_config), settings.mcp_logs)
        except McpConfigError as exc:
            raise DuragentError(str(exc)) from None
    return ToolRegistry(default_tools(bash=bash), providers)


def private_paths(settings: Settings) -> list[Path]:
    """What no sandboxed command may read, whatever its workspace: the state directory
    (database, dev server, every session's workspace), a SQLite database kept elsewhere,
    and the home directory of the worker's user (keys, tokens, other projects)."""
    paths = [settings.home, Path.home()]
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
    model: anthropic.AsyncAnthropic | None = None,
    extensions: Sequence[Extension] = (),
) -> Worker:
    """A worker for `settings.task_queue`: the session workflows and their activities,
    with the built-in and MCP tools (or `tools`) and the given extensions' hooks. When it
    stops, it closes the tools' MCP connections."""
    registry = tools or tool_registry(settings)
    bash = registry.get("bash")
    if settings.tool_sandbox != "none" and isinstance(bash, BashTool) and bash.sandbox is None:
        raise DuragentError(
            f"DURAGENT_TOOL_SANDBOX={settings.tool_sandbox}, but the tools given to the worker "
            "run bash unsandboxed: build them with worker.tool_registry(settings)"
        )
    facades = DuragentClient(client, db, settings)
    hooks = Extensions(extensions, lambda session_id: SessionFacade(facades, session_id))
    taker = SnapshotTaker(hooks, settings.resources_dir)
    bookkeeping = Bookkeeping(db, hooks, taker)
    anthropic_client = model or model_client(settings)
    # Entries and paths read by one activity are there for the next: they never change.
    cache = EntryCache()
    models = ModelTurns(db, anthropic_client, registry, hooks, taker, cache)
    tree = TreeOps(db, anthropic_client, cache)
    subagents = Subagents(db, registry)
    return SessionWorker(
        registry,
        client,
        task_queue=settings.task_queue,
        workflows=[SessionRun, SessionChanges, SessionCompaction, SessionNavigation],
        activities=[
            bookkeeping.start_run,
            bookkeeping.finish_run,
            bookkeeping.apply_changes,
            bookkeeping.record_events,
            bookkeeping.take_guidance,
            models.model_turn,
            tree.plan_compaction,
            tree.summarize,
            tree.commit_compaction,
            tree.plan_navigation,
            tree.commit_navigation,
            tree.save_turn,
            ToolCalls(db, registry, hooks, ProcessRecords(settings.tool_processes)).run_tool,
            subagents.start_subagent,
            subagents.finish_subagent,
        ],
        activity_executor=ThreadPoolExecutor(max_workers=32),
        # Cancellation reaches an activity in the reply to a heartbeat, so the throttle
        # bounds abort latency (measured: about the throttle plus 5 ms). The default
        # would hold heartbeats back for seconds.
        max_heartbeat_throttle_interval=timedelta(milliseconds=settings.heartbeat_throttle_ms),
        default_heartbeat_throttle_interval=timedelta(milliseconds=settings.heartbeat_throttle_ms),
        # After a worker dies, its cached runs move to another worker this quickly.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        workflow_runner=workflow_runner(),
        # Tracing its client does not bring (a client of `connect_temporal` brings it).
        interceptors=tracing.worker_interceptors(client),
    )


class SessionWorker(Worker):
    """A Temporal worker that closes its tools' connections (MCP servers, their
    processes) once it has stopped, and with them nothing runs any more."""

    def __init__(self, tools: ToolRegistry, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tool_registry = tools

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            await self._tool_registry.aclose()


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox, with our pure domain package passed through (loaded once, shared), and
    OpenTelemetry, as Temporal's own OpenTelemetry plugin does (traced workflows use it)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("domain", "opentelemetry")
    )


async def run_worker(settings: Settings) -> None:
    """Run a worker until cancelled (the CLI cancels on a stop signal); leaving, it shuts
    down: running activities are cancelled, which kills their tool processes."""
    tools = tool_registry(settings)  # a sandbox that cannot run fails before anything starts
    client = await connect_temporal(settings)
    db = open_store(settings)
    try:
        async with build_worker(client, db, settings, tools=tools):
            await asyncio.Event().wait()
    finally:
        db.dispose()
