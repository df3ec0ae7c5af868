"""What the benchmarks share: a dev server, a store, the offline model, a worker."""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporal_dev import DevServer  # noqa: E402

from client.api import DuragentClient  # noqa: E402
from client.connection import connect_temporal  # noqa: E402
from offline_model import OfflineModelServer, Script  # noqa: E402
from settings import Settings  # noqa: E402
from store.db import Database  # noqa: E402


@dataclass
class Bench:
    settings: Settings
    client: DuragentClient
    model: OfflineModelServer
    home: Path


@contextlib.asynccontextmanager
async def bench_stack(script: Script | dict[str, Any]) -> AsyncIterator[Bench]:
    """A fresh dev server, store and offline model in a temporary directory."""
    script_model = script if isinstance(script, Script) else Script.model_validate(script)
    with tempfile.TemporaryDirectory(prefix="duragent-bench-") as tmp:
        home = Path(tmp)
        server = DevServer(home / "temporal.db")
        await server.astart()
        model = OfflineModelServer(script_model)
        model.start()
        try:
            settings = Settings.from_env(
                home=home,
                database_url=f"sqlite:///{home / 'duragent.db'}",
                temporal_address=server.address,
                task_queue=f"bench-{uuid.uuid4().hex[:8]}",
                anthropic_base_url=model.base_url,
            ).model_copy(update={"anthropic_api_key": None})
            temporal = await connect_temporal(settings)
            db = Database(settings.database_url)
            yield Bench(settings, DuragentClient(temporal, db, settings), model, home)
            db.dispose()
        finally:
            model.stop()
            server.stop()


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
    env = dict(os.environ)
    env.update(
        DURAGENT_HOME=str(bench.home),
        DURAGENT_DATABASE_URL=bench.settings.database_url,
        TEMPORAL_ADDRESS=bench.settings.temporal_address,
        DURAGENT_TASK_QUEUE=bench.settings.task_queue,
        ANTHROPIC_BASE_URL=bench.model.base_url,
        DURAGENT_HEARTBEAT_TIMEOUT=str(bench.settings.heartbeat_timeout_s),
        PYTHONPATH=str(ROOT),
        **extra,
    )
    env.pop("ANTHROPIC_API_KEY", None)
    return env


def spawn(bench: Bench, *args: str, **extra_env: str) -> subprocess.Popen[bytes]:
    """`python ARGS` in its own process group, quiet, with the stack's environment."""
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=process_env(bench, **extra_env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def spawn_worker(bench: Bench) -> subprocess.Popen[bytes]:
    return spawn(bench, "-c", "import worker; worker.main()")


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group, as a machine failure would."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
