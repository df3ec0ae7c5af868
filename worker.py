"""The duragent worker: hosts the session workflows and every activity they call.

Run it with `duragent worker`; run as many as you like, on as many machines as share the
Temporal cluster and the database. `build_worker` is the one place that wires the parts
together, for the CLI, the tests and embedders alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import anthropic
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.bookkeeping import Bookkeeping
from activities.extensions import Extension, Extensions
from activities.model_turn import ModelTurns
from activities.snapshots import SnapshotTaker
from activities.tool_call import ToolCalls
from activities.tools import ToolRegistry, default_tools
from activities.tree_ops import TreeOps
from client.api import DuragentClient
from client.connection import connect_temporal, open_store
from client.facade import SessionFacade
from settings import Settings
from store.db import Database
from store.entries import EntryCache
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
    with the built-in tools (or `tools`) and the given extensions' hooks."""
    registry = tools or ToolRegistry(default_tools())
    facades = DuragentClient(client, db, settings)
    hooks = Extensions(extensions, lambda session_id: SessionFacade(facades, session_id))
    taker = SnapshotTaker(hooks, settings.home / "resources")
    bookkeeping = Bookkeeping(db, hooks, taker)
    anthropic_client = model or model_client(settings)
    # Entries and paths read by one activity are there for the next: they never change.
    cache = EntryCache()
    models = ModelTurns(db, anthropic_client, registry, hooks, taker, cache)
    tree = TreeOps(db, anthropic_client, cache)
    return Worker(
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
            ToolCalls(db, registry, hooks).run_tool,
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
    )


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox, with our pure domain package passed through (loaded once, shared)."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("domain")
    )


async def run_worker(settings: Settings) -> None:
    """Run a worker until cancelled (the CLI cancels on a stop signal); leaving, it shuts
    down: running activities are cancelled, which kills their tool processes."""
    client = await connect_temporal(settings)
    db = open_store(settings)
    try:
        async with build_worker(client, db, settings):
            await asyncio.Event().wait()
    finally:
        db.dispose()


def main() -> None:
    asyncio.run(run_worker(Settings.from_env()))


if __name__ == "__main__":
    main()
