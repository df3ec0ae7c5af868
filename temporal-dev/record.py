"""Which dev server a state folder started: its ports and its cluster's id, kept in a file
beside its database, so that a later command of the same folder finds it and a command of
another folder never takes it for its own.

A dev server's cluster id is made once, when its database file is created, and kept in
it: the server answering at a port is the one of a database file exactly when it reports
that file's cluster id. Two folders on one machine each run their own server, each on a
port of its own; the record says which port that is.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.api.workflowservice.v1 import GetClusterInfoRequest
from temporalio.client import Client

from .probe import PROBE_RPC_TIMEOUT


@dataclass(frozen=True)
class DevServerRecord:
    port: int
    """The frontend's port on 127.0.0.1."""
    ui_port: int | None
    """The web UI's port, None when headless."""
    cluster_id: str
    """What the server on this folder's database reports as its cluster id."""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def record_path(db_file: Path) -> Path:
    """Where the record of the dev server on `db_file` is kept: beside it."""
    return db_file.with_name(f"{db_file.stem}-dev-server.json")


def read_record(path: Path) -> DevServerRecord | None:
    """The record at `path`; None when there is none or it cannot be read (a record is a
    hint that the next start rewrites, never a reason to fail)."""
    try:
        data = json.loads(path.read_text())
        ui_port = data.get("ui_port")
        return DevServerRecord(
            port=int(data["port"]),
            ui_port=int(ui_port) if ui_port is not None else None,
            cluster_id=str(data["cluster_id"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_record(path: Path, record: DevServerRecord) -> None:
    """Write the record whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(asdict(record)))
    try:
        temporary.replace(path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


async def cluster_id(address: str) -> str | None:
    """The cluster id of the Temporal answering at `address`; None if none answers."""
    try:
        client = await Client.connect(address)
        timeout = timedelta(seconds=PROBE_RPC_TIMEOUT)
        info = await client.workflow_service.get_cluster_info(
            GetClusterInfoRequest(), retry=False, timeout=timeout
        )
    except Exception:
        return None
    return info.cluster_id or None
