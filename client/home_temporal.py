"""A home's own Temporal dev server, what a command uses when no `TEMPORAL_ADDRESS` is set:
how to find it running. (The command line starts it: `client.services`.)

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

from duragent.settings import Settings
from duragent.temporal_dev import is_reachable
from duragent.temporal_dev.record import DevServerRecord, cluster_id, read_record, record_path


def at_home_server(settings: Settings, record: DevServerRecord) -> Settings:
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
    return at_home_server(settings, record)
