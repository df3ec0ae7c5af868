"""A home's own Temporal dev server: what a command uses when no `TEMPORAL_ADDRESS` is set.

Each state directory (home) runs its own dev server on its own database file
(`<home>/temporal.db`): at 127.0.0.1:7233 when that port is free, else on a free port,
and the record beside the file (`temporal_dev.record`) says which port and which
cluster id. A command of the home uses the server at the recorded port only when it
reports the recorded cluster id, so two folders on one machine never share (or stop)
each other's server, never run on each other's history, and never take each other's
work: each folder's workers poll their own server.

Starting is under a lock of the home, so two commands of one home starting at once
start one server and share it (`client.service_users`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from filelock import AsyncFileLock

from duragent.client.service_users import ServiceUsers
from duragent.settings import Settings
from duragent.temporal_dev import DevServer, DevServerError, is_reachable
from duragent.temporal_dev.errors import PortInUseError
from duragent.temporal_dev.ports import split_address
from duragent.temporal_dev.probe import tcp_open
from duragent.temporal_dev.record import (
    DevServerRecord,
    cluster_id,
    read_record,
    record_path,
    write_record,
)

Announce = Callable[[str], None]


def _at(settings: Settings, record: DevServerRecord) -> Settings:
    """`settings` pointed at the recorded server (its UI too, unless one is set)."""
    update: dict[str, object] = {"temporal_address": record.address}
    if "temporal_ui_port" not in settings.model_fields_set or settings.temporal_ui_port is None:
        update["temporal_ui_port"] = record.ui_port
    return settings.model_copy(update=update)


async def running_home_server(settings: Settings) -> Settings | None:
    """`settings` at the home's dev server when it answers now (the server at the
    recorded port reports the recorded cluster id and serves the namespace); else None."""
    record = read_record(record_path(settings.dev_server_db))
    if record is None or await cluster_id(record.address) != record.cluster_id:
        return None
    if not await is_reachable(record.address, settings.temporal_namespace):
        return None
    return _at(settings, record)


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
            started = await _start(settings, announce)
            try:
                running = _at(settings, await _record(settings, started))
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


async def _start(settings: Settings, announce: Announce) -> DevServer:
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
