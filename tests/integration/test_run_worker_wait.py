"""`duragent run` on a worker it does not own: it names the worker it relies on, and when
that worker does not answer (killed: Temporal still lists it among the pollers for a
minute) it says so and starts one of its own instead of waiting. Real processes: a dev
server, a `duragent worker`, the `duragent run` command."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import uuid
from pathlib import Path

from integration.test_cli_lifecycle import (
    FATAL,
    Command,
    cli_env,
    duragent,
    one_tool_call,
    polling,
)
from support import eventually

from duragent.activities.leases import lease_owner
from duragent.client.connection import connect_temporal
from duragent.client.services import live_workers
from duragent.settings import Settings
from duragent.store import leases
from duragent.store.db import Database
from duragent.temporal_dev import DevServer
from duragent.temporal_dev.ports import free_port


def worker_env(tmp_path: Path, address: str) -> dict[str, str]:
    """One home and task queue for the worker and the run, as in two terminals of a user
    (Temporal at `address`)."""
    script = tmp_path / "script.yaml"
    script.write_text(one_tool_call("echo from the tool"))
    return cli_env(
        tmp_path / "home",
        script,
        TEMPORAL_ADDRESS=address,
        DURAGENT_TASK_QUEUE=f"wait-{uuid.uuid4().hex[:8]}",
    )


def start_worker(env: dict[str, str]) -> tuple[Command, str]:
    """A `duragent worker` polling the task queue, and its identity as Temporal lists it."""
    working = Command(env, "worker")
    working.err.wait_for(r"Worker on task queue")
    asyncio.run(polling(env["TEMPORAL_ADDRESS"], env["DURAGENT_TASK_QUEUE"]))
    return working, f"{working.pid}@{socket.gethostname()}"


def env_settings(env: dict[str, str]) -> Settings:
    return Settings.from_env(
        home=Path(env["DURAGENT_HOME"]),
        temporal_address=env["TEMPORAL_ADDRESS"],
        task_queue=env["DURAGENT_TASK_QUEUE"],
    )


async def listed_workers(env: dict[str, str]) -> list[str]:
    settings = env_settings(env)
    return await live_workers(await connect_temporal(settings), settings)


def lease_holders(env: dict[str, str]) -> set[str]:
    """The workers (`pid@host`) that hold a lease in the store."""
    db = Database(env_settings(env).database_url, run_migrations=False)
    try:
        with db.transaction() as session:
            return {lease_owner(worker_id) for worker_id in leases.leases(session)}
    finally:
        db.dispose()


def test_run_names_the_live_worker_it_relies_on(tmp_path: Path, dev_server: DevServer) -> None:
    env = worker_env(tmp_path, dev_server.address)
    working, identity = start_worker(env)
    try:
        ran = duragent(env, "run", "go")
        assert ran.returncode == 0, ran.stderr
        queue = env["DURAGENT_TASK_QUEUE"]
        assert f"Using the worker {identity} already polling task queue {queue}." in ran.stderr
        assert "run completed" in ran.stdout and "from the tool" in ran.stdout
        # The worker elsewhere answered: nothing was started here.
        assert "Started a worker" not in ran.stderr and "No worker answered" not in ran.stderr
        assert "offline model" not in ran.stderr, ran.stderr
    finally:
        working.kill()


def test_a_killed_worker_is_known_dead_within_its_lease(
    tmp_path: Path, dev_server: DevServer
) -> None:
    """Temporal lists a killed worker among the pollers for a minute; its lease stops
    renewing at once, so the next command knows within the lease time (2 s) and starts a
    worker of its own instead of relying on the dead one."""
    env = worker_env(tmp_path, dev_server.address)
    working, identity = start_worker(env)
    asyncio.run(eventually(lambda: identity in lease_holders(env)))
    assert asyncio.run(listed_workers(env)) == [identity]
    try:
        os.killpg(working.pid, signal.SIGKILL)  # as a machine failure would: not a word
        assert working.wait() == -signal.SIGKILL
    finally:
        working.kill()
    # At once, not after the minute Temporal keeps listing it as a poller.
    assert asyncio.run(listed_workers(env)) == []

    ran = duragent(env, "run", "go")
    assert ran.returncode == 0, ran.stderr
    assert FATAL not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert "run completed" in ran.stdout and "from the tool" in ran.stdout
    assert "Using the worker" not in ran.stderr and "No worker answered" not in ran.stderr
    assert "Started a worker in this process" in ran.stderr


def test_run_starts_its_own_worker_when_the_polling_one_was_killed(
    tmp_path: Path, dev_server: DevServer
) -> None:
    """Without leases (turned off), a killed worker passes for a live one for a minute:
    the run relies on it, and once its task goes unanswered it starts a worker itself."""
    env = {**worker_env(tmp_path, dev_server.address), "DURAGENT_WORKER_LEASE": "0"}
    working, identity = start_worker(env)
    try:
        os.killpg(working.pid, signal.SIGKILL)  # as a machine failure would: not a word
        assert working.wait() == -signal.SIGKILL
    finally:
        working.kill()
    # What the run is up against: the killed worker still passes for a live one.
    assert asyncio.run(listed_workers(env)) == [identity]

    ran = duragent(env, "run", "go")
    assert ran.returncode == 0, ran.stderr
    assert FATAL not in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
    assert "run completed" in ran.stdout and "from the tool" in ran.stdout
    lines = ran.stderr.splitlines()
    relied = line_of(lines, f"Using the worker {identity} already polling")
    unanswered = line_of(lines, "No worker answered for ")
    assert f"(the worker {identity} may have stopped)" in lines[unanswered]
    started = line_of(lines, "Started a worker in this process")
    assert relied < unanswered < started, ran.stderr


def test_a_worker_started_before_temporal_waits_for_it(tmp_path: Path) -> None:
    """A worker whose Temporal is not up yet (started first, or during a restart) says
    what it waits for and waits, then works once Temporal is up: no traceback, no exit."""
    address = f"127.0.0.1:{free_port('127.0.0.1')}"
    env = worker_env(tmp_path, address)
    working = Command(env, "worker")
    try:
        working.err.wait_for(
            rf"Temporal at {re.escape(address)} is not reachable \(.+\); waiting for it"
        )
        with DevServer(tmp_path / "temporal.db", port=int(address.rsplit(":", 1)[1])):
            working.err.wait_for(rf"Temporal at {re.escape(address)} is up")
            asyncio.run(polling(address, env["DURAGENT_TASK_QUEUE"]))
            ran = duragent(env, "run", "go")
        assert ran.returncode == 0, ran.stderr
        assert f"Using the worker {working.pid}@{socket.gethostname()}" in ran.stderr
        assert "run completed" in ran.stdout and "from the tool" in ran.stdout
        assert "Traceback" not in working.err.text
    finally:
        working.kill()


def line_of(lines: list[str], start: str) -> int:
    """The index of the line that starts with `start`."""
    found = [i for i, line in enumerate(lines) if line.startswith(start)]
    assert found, f"no line starting {start!r} in:\n" + "\n".join(lines)
    return found[0]
