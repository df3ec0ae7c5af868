"""The store through PgBouncer in transaction mode, as a fleet deploys it in front of a
shared PostgreSQL: a real `pgbouncer` (its own config, port and auth file) whose few server
sessions every connection of the worker and of the client shares, transaction by
transaction. Debian's PgBouncer 1.18 keeps no prepared statements in that mode, so the
store must not prepare any (`DURAGENT_DATABASE_PREPARED_STATEMENTS=false`); left on, the
error says so.

Skipped when PgBouncer (or PostgreSQL) is not installed, unless `DURAGENT_REQUIRE_POSTGRES`
is set (CI sets it): then the test fails.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_server import new_database
from sqlalchemy.engine import URL, make_url
from support import Stack, eventually
from temporalio.client import Client

from duragent.client.api import DuragentClient
from duragent.client.connection import open_store
from duragent.domain.entries import MessageEntry
from duragent.domain.messages import ToolResultMessage, text_of
from duragent.offline_model import OfflineModelServer, Script
from duragent.settings import Settings
from duragent.temporal_dev import DevServer

POOL_SIZE = 2
"""PgBouncer's server sessions per database: far fewer than the connections the worker,
its lease and the client open, so each transaction takes whichever session is free."""

TURNS = 8
"""Model turns of the run, each with a tool call: every store step of a turn runs the same
statements again, many more than the five executions after which psycopg would prepare
them (`prepare_threshold`)."""


def find_pgbouncer() -> str | None:
    """The `pgbouncer` program (Debian puts it in /usr/sbin, off a user's PATH)."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


class PgBouncer:
    """PgBouncer in transaction mode in front of the PostgreSQL server at `server_url`: its
    config, auth file and log in a folder of its own under the system temporary folder
    (which the `postgres` user it runs as, under root, can reach; pytest's folders are
    private), removed on `stop`."""

    def __init__(self, program: str, server_url: str) -> None:
        self.program = program
        self.server = make_url(server_url)
        self.folder = Path(tempfile.mkdtemp(prefix="duragent-pgbouncer-"))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.process: subprocess.Popen[bytes] | None = None

    def through(self, url: str) -> str:
        """`url` (a database on the server) through PgBouncer."""
        routed: URL = make_url(url).set(host="127.0.0.1", port=self.port)
        return routed.render_as_string(hide_password=False)

    def start(self) -> PgBouncer:
        user, password = self.server.username or "postgres", self.server.password or ""
        (self.folder / "users.txt").write_text(f'"{user}" "{password}"\n')
        (self.folder / "pgbouncer.ini").write_text(
            "\n".join(
                [
                    "[databases]",
                    # Every database name, to the same server (the tests make new ones).
                    f"* = host={self.server.host or '127.0.0.1'} port={self.server.port or 5432}",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.folder / 'users.txt'}",
                    "pool_mode = transaction",
                    f"default_pool_size = {POOL_SIZE}",
                    "max_client_conn = 500",
                    f"logfile = {self.folder / 'pgbouncer.log'}",
                    "",
                ]
            )
        )
        prefix: list[str] = []
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, "postgres")
            prefix = ["runuser", "-u", "postgres", "--"]
        self.process = subprocess.Popen(
            [*prefix, self.program, str(self.folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_it_serves(make_url(self.through(self.server.render_as_string(False))))
        return self

    def _wait_until_it_serves(self, url: URL) -> None:
        deadline = time.monotonic() + 30
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"pgbouncer exited at start:\n{self.log()}")
            try:
                with psycopg.connect(
                    host=url.host, port=url.port, user=url.username, dbname=url.database
                ) as connection:
                    connection.execute("SELECT 1")
                return
            except psycopg.OperationalError as error:
                if time.monotonic() > deadline:
                    log = self.log()
                    raise AssertionError(f"pgbouncer did not serve in 30 s:\n{log}") from error
                time.sleep(0.05)

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                self.process.terminate()
                self.process.wait(timeout=10)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def pgbouncer(postgres_server: str) -> Iterator[PgBouncer]:
    program = find_pgbouncer()
    if program is None:
        reason = "PgBouncer is not installed (Debian: apt-get install pgbouncer)"
        if os.environ.get("DURAGENT_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    bouncer = PgBouncer(program, postgres_server).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()


SCRIPT = {
    "conversations": {
        "*": [
            *(
                {
                    "reply": [
                        {"text": f"Step {step}."},
                        {"tool_use": {"name": "bash", "input": {"command": f"echo {step}"}}},
                    ]
                }
                for step in range(1, TURNS)
            ),
            {"reply": [{"text": "All steps done."}]},
        ]
    }
}


@dataclass
class Bounced:
    stack: Stack
    worker_env: dict[str, str]
    """What a worker process of this store is given beside the stack's settings."""


@pytest.fixture
async def bounced(
    tmp_path: Path,
    temporal: Client,
    dev_server: DevServer,
    postgres_server: str,
    pgbouncer: PgBouncer,
    request: pytest.FixtureRequest,
) -> AsyncIterator[Bounced]:
    """A stack whose store is a fresh database reached through PgBouncer, by the client
    and by the workers it spawns, with prepared statements as the test's parameter says
    (None: the setting left unset). Their cancel hints `LISTEN` on PostgreSQL itself, as
    a deployment behind PgBouncer has them (docs/DEPLOYING.md)."""
    prepared: bool | None = request.param
    direct = new_database(postgres_server)
    url = pgbouncer.through(direct)
    model = OfflineModelServer(Script.model_validate(SCRIPT))
    await model.__aenter__()
    overrides: dict[str, Any] = {"database_listen_url": direct}
    worker_env = {"DURAGENT_DATABASE_LISTEN_URL": direct}
    if prepared is not None:
        overrides["database_prepared_statements"] = prepared
        worker_env["DURAGENT_DATABASE_PREPARED_STATEMENTS"] = str(prepared).lower()
    settings = Settings.from_env(
        home=tmp_path,
        database_url=url,
        temporal_address=dev_server.address,
        task_queue=f"test-{uuid.uuid4().hex[:12]}",
        anthropic_base_url=model.base_url,
        offline_model_url=model.base_url,
        **overrides,
    )
    settings = settings.model_copy(update={"anthropic_api_key": None})
    db = await asyncio.to_thread(open_store, settings)  # migrated through PgBouncer
    stack = Stack(settings, db, temporal, model, DuragentClient(temporal, db, settings))
    try:
        yield Bounced(stack, worker_env)
    finally:
        stack.close()
        await model.__aexit__(None, None, None)
        db.dispose()


@pytest.mark.parametrize("bounced", [False], indirect=True)
async def test_a_run_through_pgbouncer_in_transaction_mode(bounced: Bounced) -> None:
    """With prepared statements off, a run of many turns goes through PgBouncer's shared
    server sessions as it does on PostgreSQL itself, nothing failed or taken twice."""
    stack = bounced.stack
    worker = stack.spawn_worker(bounced.worker_env)
    session = await stack.client.sessions.create(name="through pgbouncer")
    handle = await stack.client.runs.prompt(session.id, "Do the steps.")
    result = await asyncio.wait_for(handle.result(), timeout=120)
    stack.kill(worker)

    log = (stack.settings.home / "worker-0.log").read_text()
    assert result.status == "completed", f"{result.error}\nworker log:\n{log}"
    assert result.turns == TURNS
    assert result.final_text == "All steps done."
    assert "prepared statement" not in log
    # Each turn asked the model once (a turn whose attempt failed in the store asks again).
    assert len(stack.model.requests_for(session.id)) == TURNS

    path = await stack.client.tree.path(session.id)
    results = [
        text_of(e.message.content)
        for e in path
        if isinstance(e, MessageEntry) and isinstance(e.message, ToolResultMessage)
    ]
    assert [r.strip() for r in results] == [str(step) for step in range(1, TURNS)]
    display = await stack.client.display.messages(session.id)
    assert [d.role for d in display][-1] == "assistant"

    events = [e async for e in stack.client.events.stream(session.id, follow=False)]
    types = [e.type for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert types.count("turn_start") == types.count("turn_end") == TURNS
    assert types.count("tool_execution_start") == types.count("tool_execution_end") == TURNS - 1
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    run = await stack.client.runs.get(result.run_id)
    assert run is not None and run.status == "completed" and run.turns == TURNS


@pytest.mark.parametrize("bounced", [None], indirect=True)
async def test_prepared_statements_through_pgbouncer_fail_naming_the_setting(
    bounced: Bounced,
) -> None:
    """Left on, psycopg's statements go missing between transactions: the worker's log
    says what stands in between and which setting fixes it."""
    stack = bounced.stack
    stack.spawn_worker(bounced.worker_env)
    session = await stack.client.sessions.create()
    await stack.client.runs.prompt(session.id, "Do the steps.")
    log = stack.settings.home / "worker-0.log"

    def told() -> bool:
        return "DURAGENT_DATABASE_PREPARED_STATEMENTS=false" in log.read_text()

    await eventually(told, timeout=90)
    text = log.read_text()
    assert "PgBouncer" in text and "transaction mode" in text
    assert 'prepared statement "_pg3_' in text  # the driver's own words, kept
