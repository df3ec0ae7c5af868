"""The soak's services, each one a real process the soak can take down and bring back.

PostgreSQL (the store), the Temporal dev server (on a SQLite file: a restart keeps every
history), the offline model (in this process, with chaos) and three worker processes, each
one host with its own state directory. Every child runs in a process group of its own, so a
kill takes the whole group, as a machine failure would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from hosts_support import Host
from postgres_server import PostgresServer, find_binaries, new_database
from processes import WORKER_ARGS, kill_group, spawn_python, stack_env
from soak_tools import EXECUTIONS_ENV
from soak_tools import plugin as soak_plugin
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

from duragent.client.api import DuragentClient
from duragent.client.connection import connect_temporal
from duragent.offline_model import OfflineModelServer, Script
from duragent.settings import Settings
from duragent.store.db import Database
from duragent.temporal_dev import DevServer

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

HOST_NAMES = ("soak-a", "soak-b", "soak-c")


def quiet_temporal_client() -> None:
    """The SDK's core logs a warning for each retried call while the dev server is down:
    hundreds per restart, which the soak causes on purpose. Keep its errors only."""
    errors_only = TelemetryFilter(core_level="ERROR", other_level="ERROR")
    runtime = Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=errors_only)))
    Runtime.set_default(runtime, error_if_already_set=False)


@dataclass
class Services:
    home: Path
    settings: Settings
    postgres: PostgresServer
    temporal: DevServer
    model: OfflineModelServer
    client: DuragentClient
    db: Database
    hosts: list[Host]
    executions: Path
    """The file the soak's tools append each execution to (see soak_tools)."""
    stopped: set[str] = field(default_factory=set)
    """Hosts whose worker is paused (SIGSTOP) right now."""
    killed: set[str] = field(default_factory=set)
    """Hosts whose worker the chaos killed and will start again."""
    exits: list[str] = field(default_factory=list)
    """Workers that exited by themselves (and were started again by `supervise`)."""

    # ---------------------------------------------------------------- workers

    def worker_env(self, host: Host) -> dict[str, str]:
        env = stack_env(self.settings, self.model.base_url)
        env.update(
            DURAGENT_HOST=host.name,
            DURAGENT_HOME=str(host.home),
            DURAGENT_PLUGINS="soak_tools:plugin",
            PYTHONPATH=os.pathsep.join([str(ROOT), str(BENCH)]),
            **{EXECUTIONS_ENV: str(self.executions)},
        )
        return env

    def start_worker(self, host: Host) -> None:
        self.killed.discard(host.name)
        host.home.mkdir(parents=True, exist_ok=True)
        with open(host.home / "worker.log", "ab") as log:
            host.process = spawn_python(WORKER_ARGS, self.worker_env(host), log)

    def kill_worker(self, host: Host) -> None:
        """SIGKILL the host's worker and its whole process group."""
        self.killed.add(host.name)
        if host.process is not None:
            kill_group(host.process)
        self.stopped.discard(host.name)

    async def supervise(self, stop: asyncio.Event, started: float) -> None:
        """Start again a worker that exited by itself, as systemd or Kubernetes would: a
        worker that starts while the dev server or the database is down exits."""
        while not stop.is_set():
            for host in self.hosts:
                process = host.process
                if host.name in self.killed or process is None or process.poll() is None:
                    continue
                at = time.monotonic() - started
                self.exits.append(f"{at:6.1f} s  {host.name} exited ({process.returncode})")
                kill_group(process)  # whatever it left in its group
                self.start_worker(host)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)  # a supervisor's round

    def pause_worker(self, host: Host) -> None:
        assert host.process is not None
        os.killpg(host.process.pid, signal.SIGSTOP)
        self.stopped.add(host.name)

    def resume_worker(self, host: Host) -> None:
        assert host.process is not None
        os.killpg(host.process.pid, signal.SIGCONT)
        self.stopped.discard(host.name)

    def stop_workers(self, timeout: float = 30.0) -> list[str]:
        """Stop every worker as an operator would (SIGTERM), SIGKILL after `timeout`. Returns
        the hosts whose worker had to be killed."""
        killed = []
        for host in self.hosts:
            if host.process is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(host.process.pid, signal.SIGCONT)
                os.killpg(host.process.pid, signal.SIGTERM)
        for host in self.hosts:
            if host.process is None:
                continue
            try:
                host.process.wait(timeout)
            except subprocess.TimeoutExpired:
                killed.append(host.name)
            kill_group(host.process)  # whatever is left in its group
            host.process = None
        return killed

    # ---------------------------------------------------------------- Temporal

    async def restart_temporal(self, how: str, down_s: float) -> None:
        """Take the dev server down (SIGTERM: "term", SIGKILL: "kill") for `down_s`, then
        start it again on the same file and port: every history is still there."""
        if how == "term":
            await self.temporal.astop()
        else:
            self.temporal.kill()
        await asyncio.sleep(down_s)
        self.temporal = DevServer(self.temporal.db_file, port=self.temporal.port)
        await self.temporal.astart(timeout=120)

    # --------------------------------------------------------------- PostgreSQL

    async def restart_postgres(self, down_s: float) -> None:
        """Stop PostgreSQL at once (`-m immediate`: no clean shutdown, as a crash) for
        `down_s`, then start it on the same data: every connection breaks."""
        await asyncio.to_thread(pg_ctl, self.postgres, "stop", "-m", "immediate")
        await asyncio.sleep(down_s)
        await asyncio.to_thread(start_postgres, self.postgres)


def pg_ctl(server: PostgresServer, *args: str) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    command = [str(server.binaries / "pg_ctl"), "-D", str(server.folder / "data"), *args]
    subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)


def start_postgres(server: PostgresServer) -> None:
    # The options PostgresServer.start gives, so the restarted server is the same one.
    options = (
        f"-p {server.port} -k {server.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c max_connections=300"
    )
    pg_ctl(server, "-o", options, "-l", str(server.folder / "log"), "-w", "start")


@contextlib.asynccontextmanager
async def soak_services(
    script: Script, heartbeat_timeout_s: float, keep: bool = False
) -> AsyncIterator[Services]:
    """Everything up, the workers polling; everything down and reaped on the way out (the
    folder with the workers' logs and workspaces removed, unless `keep`)."""
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("the soak needs PostgreSQL (initdb, pg_ctl)")
    home = Path(tempfile.mkdtemp(prefix="duragent-soak-"))
    try:
        postgres = PostgresServer(binaries)
        # initdb via PostgresServer.start, then a restart with room for three workers'
        # connection pools and the soak's own.
        postgres.start()
        temporal = DevServer(home / "temporal" / "temporal.db")
        model = OfflineModelServer(script)
        db: Database | None = None
        services: Services | None = None
        try:
            await asyncio.to_thread(pg_ctl, postgres, "stop", "-m", "fast")
            await asyncio.to_thread(start_postgres, postgres)
            (home / "temporal").mkdir()
            await temporal.astart(timeout=120)
            await model.__aenter__()
            settings = Settings.from_env(
                home=home,
                database_url=new_database(postgres.url),
                temporal_address=temporal.address,
                task_queue=f"soak-{uuid.uuid4().hex[:8]}",
                anthropic_base_url=model.base_url,
                offline_model_url=model.base_url,
                heartbeat_timeout_s=heartbeat_timeout_s,
            ).model_copy(update={"anthropic_api_key": None})
            db = Database(settings.database_url)
            quiet_temporal_client()
            client = DuragentClient(
                await connect_temporal(settings), db, settings, plugins=[soak_plugin]
            )
            hosts = [Host(name, home / name) for name in HOST_NAMES]
            services = Services(
                home=home,
                settings=settings,
                postgres=postgres,
                temporal=temporal,
                model=model,
                client=client,
                db=db,
                hosts=hosts,
                executions=home / "executions.log",
            )
            for host in hosts:
                services.start_worker(host)
            yield services
        finally:
            if services is not None:
                services.stop_workers()
                services.temporal.stop()
            else:
                temporal.stop()
            await model.__aexit__(None, None, None)
            if db is not None:
                db.dispose()
            if keep:  # the store too: a failing soak is read from it afterwards
                await asyncio.to_thread(pg_ctl, postgres, "stop", "-m", "fast")
            else:
                postgres.stop()
    finally:
        if not keep:
            shutil.rmtree(home, ignore_errors=True)
