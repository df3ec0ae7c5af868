"""What the benchmarks share: a dev server, a store, the offline model, a worker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the stack's processes: tests/processes.py

from processes import WORKER_ARGS, kill_group, spawn_python, stack_env  # noqa: E402
from temporalio.api.enums.v1 import TaskQueueType  # noqa: E402
from temporalio.api.taskqueue.v1 import TaskQueue  # noqa: E402
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest  # noqa: E402

from duragent.client.api import DuragentClient  # noqa: E402
from duragent.client.connection import connect_temporal  # noqa: E402
from duragent.domain.hosts import host_task_queue  # noqa: E402
from duragent.domain.models import PROVIDERS  # noqa: E402
from duragent.offline_model import WIRE_MODELS, OfflineModelServer, Script  # noqa: E402
from duragent.settings import Settings  # noqa: E402
from duragent.store.db import Database  # noqa: E402
from duragent.temporal_dev import DevServer  # noqa: E402
from duragent.temporal_dev.ports import free_port  # noqa: E402


@dataclass
class Bench:
    settings: Settings
    client: DuragentClient
    model: OfflineModelServer
    home: Path
    server_pid: int | None = None
    """The Temporal dev server's process (for its CPU time)."""
    metrics_url: str | None = None
    """The dev server's Prometheus metrics (`bench/actions.py` reads its action counter)."""


@contextlib.asynccontextmanager
async def bench_stack(
    script: Script | dict[str, Any], protocol: str = "anthropic", database_url: str | None = None
) -> AsyncIterator[Bench]:
    """A fresh dev server, store and offline model in a temporary directory; sessions on
    the offline model's `protocol` (`WIRE_MODELS`: anthropic, openai, openai-responses).
    The store is a SQLite file there unless `database_url` names one."""
    script_model = script if isinstance(script, Script) else Script.model_validate(script)
    # Every provider goes to the offline model: a key or address in the caller's shell
    # must not send a benchmark's requests to a real API (or bill them).
    for provider in PROVIDERS.values():
        for variable in (provider.key_env, provider.base_url_env):
            if variable:
                os.environ.pop(variable, None)
    with tempfile.TemporaryDirectory(prefix="duragent-bench-") as tmp:
        home = Path(tmp)
        metrics_port = free_port("127.0.0.1")
        server = DevServer(home / "temporal.db", metrics_port=metrics_port)
        await server.astart()
        model = OfflineModelServer(script_model)
        model.start()
        try:
            settings = Settings.from_env(
                home=home,
                database_url=database_url or f"sqlite:///{home / 'duragent.db'}",
                temporal_address=server.address,
                task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                anthropic_base_url=model.base_url,
                offline_model_url=model.base_url,
                model=WIRE_MODELS[protocol],
            ).model_copy(update={"anthropic_api_key": None})
            temporal = await connect_temporal(settings)
            db = Database(settings.database_url)
            client = DuragentClient(temporal, db, settings)
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            yield Bench(settings, client, model, home, server.pid, metrics)
            db.dispose()
        finally:
            model.stop()
            server.stop()


def add_protocol_option(parser: argparse.ArgumentParser) -> None:
    """`--protocol`: the wire API the sessions' model speaks (the offline model plays each)."""
    parser.add_argument(
        "--protocol",
        choices=list(WIRE_MODELS),
        default="anthropic",
        help="the model's wire API (default: anthropic)",
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return (
        ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        if ordered
        else float("nan")
    )


def process_env(bench: Bench, **extra: str) -> dict[str, str]:
    """The environment of a worker or API process of the bench's stack."""
    return stack_env(bench.settings, bench.model.base_url, **extra)


def spawn(bench: Bench, *args: str, **extra_env: str) -> subprocess.Popen[bytes]:
    """`python ARGS` in its own process group, quiet, with the stack's environment."""
    return spawn_python(list(args), process_env(bench, **extra_env))


def spawn_worker(bench: Bench) -> subprocess.Popen[bytes]:
    return spawn(bench, *WORKER_ARGS)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group, as a machine failure would."""
    kill_group(process, timeout=None)


TOOL_HOST = "tools"
"""The host of `spawn_tool_host`'s worker process."""


def spawn_tool_host(bench: Bench) -> subprocess.Popen[bytes]:
    """A worker process that runs only the tool calls of host `TOOL_HOST` (no runs, no
    model calls): a session of that host has its calls in another process than its
    run's steps. Wait for it with `worker_polling(bench, process, tool_host_queue(bench))`."""
    return spawn(bench, *WORKER_ARGS, DURAGENT_HOST=TOOL_HOST, DURAGENT_HOST_ONLY="true")


def tool_host_queue(bench: Bench) -> str:
    return host_task_queue(bench.settings.task_queue, TOOL_HOST)


async def worker_polling(
    bench: Bench, process: subprocess.Popen[bytes], queue: str | None = None, timeout: float = 60
) -> None:
    """Wait until the worker process polls `queue` (the bench's task queue unless given)
    for activities (its identity is `pid@host`, the SDK's default)."""
    deadline = time.monotonic() + timeout
    request = DescribeTaskQueueRequest(
        namespace=bench.settings.temporal_namespace,
        task_queue=TaskQueue(name=queue or bench.settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    service = bench.client.temporal.workflow_service
    while time.monotonic() < deadline:
        pollers = (await service.describe_task_queue(request)).pollers
        if any(p.identity.startswith(f"{process.pid}@") for p in pollers):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"worker {process.pid} did not poll within {timeout:g} s")
