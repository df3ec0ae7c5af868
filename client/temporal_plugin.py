"""duragent inside a Temporal client and worker you already have: `duragent.TemporalPlugin`.

```python
plugin = duragent.TemporalPlugin(settings)
client = await Client.connect("localhost:7233", plugins=[plugin])
worker = Worker(client, task_queue="my-queue", workflows=[MyWorkflow], activities=[...])
await worker.run()  # runs your workflows, and duragent's on its own task queue
```

On the client: the pydantic data converter duragent's payloads need (a converter you set
keeps its codec and failure converter) and, when the `OTEL_*` variables ask for it,
tracing. On each worker: a sandbox that passes `duragent` through, so your workflows may
import it, and, while the worker runs, a duragent worker of its own on the same client
(`build_worker`: the session workflows and activities on `settings.task_queue`, tool
calls on the host's queue). duragent's workflows keep their own task queue: its tool calls
go to host queues, and its tuning is its own; sessions started by a `DuragentClient`
with the same settings run there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from duragent.activities.extensions import Extension
from duragent.client.connection import open_store
from duragent.client.plugins import Plugin, load_plugins
from duragent.client.workers import build_worker
from duragent.client.workflow_runner import PASSED_THROUGH
from duragent.settings import Settings
from duragent.store.db import Database
from duragent.telemetry import tracing


class TemporalPlugin(SimplePlugin):
    """duragent for a Temporal client and worker of yours (see the module's text).

    `settings`: duragent's (default: from the environment); `db`: its store (default: the
    settings'); `plugins` and `extensions`: as `build_worker` takes them, on top of the
    plugins the settings load."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        db: Database | None = None,
        plugins: Sequence[Plugin] = (),
        extensions: Sequence[Extension] = (),
    ) -> None:
        self.settings = settings or Settings.from_env()
        self._db = db
        self._plugins = load_plugins(self.settings, plugins)  # a bad plugin fails here
        self._extensions = list(extensions)
        self._client: Client | None = None
        super().__init__(
            "duragent.TemporalPlugin",
            data_converter=with_pydantic_payloads,
            interceptors=tracing.client_interceptors(),
            workflow_runner=with_duragent_passed_through,
            run_context=self._run_duragent,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        # duragent's own workers take the client's plugins too: they are left as built.
        if self._is_duragents(config.get("task_queue")):
            return config
        self._client = config["client"]
        return super().configure_worker(config)

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        if self._is_duragents(worker.task_queue):
            await next(worker)
            return
        await super().run_worker(worker, next)

    def _is_duragents(self, task_queue: str | None) -> bool:
        return task_queue in (self.settings.task_queue, self.settings.host_queue)

    @asynccontextmanager
    async def _run_duragent(self) -> AsyncIterator[None]:
        """duragent's worker, for as long as the user's runs."""
        if self._client is None:  # a replayer: nothing of duragent's to run
            yield
            return
        db = self._db or open_store(self.settings)
        try:
            worker = build_worker(
                self._client,
                db,
                self.settings,
                extensions=self._extensions,
                plugins=self._plugins,
            )
            async with worker:
                yield
        finally:
            if self._db is None:
                db.dispose()


def with_pydantic_payloads(existing: DataConverter | None) -> DataConverter:
    """The client's converter with pydantic payloads (what duragent's models need); its
    codec and failure converter are kept."""
    if existing is None or existing is DataConverter.default:
        return pydantic_data_converter
    if issubclass(existing.payload_converter_class, PydanticPayloadConverter):
        return existing
    return dataclasses.replace(existing, payload_converter_class=PydanticPayloadConverter)


def with_duragent_passed_through(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The worker's sandbox with `PASSED_THROUGH` added to what it passes through; a
    runner that is not the sandbox is kept as it is."""
    if existing is None:
        existing = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default)
    if not isinstance(existing, SandboxedWorkflowRunner):
        return existing
    restrictions = existing.restrictions.with_passthrough_modules(*PASSED_THROUGH)
    return dataclasses.replace(existing, restrictions=restrictions)
