"""Processes a dead worker left behind: recorded before they act, found again, stopped.

A tool call that is not retry-safe is recorded in a small file on this machine (named by
the call's result entry id) when it begins, and each process group it starts is added
before the process may do anything (bash holds its shell at a gate until then). When the
worker dies, its processes keep running; the call's next attempt, if it lands on the same
machine, reads the record and stops them before reporting the call as interrupted.
Heartbeat details carry the same identities, for operators reading the pending activity.

A call can also end with no next attempt here: its run was aborted while no worker was
alive, or the next attempt ran on another machine. So each worker also sweeps the
records of this machine (`sweep_records`, every few seconds): a record whose worker
process is gone has its process groups stopped, and says so for a next attempt that
comes later; a swept record is removed once it is old.

An identity is the process group id with the host and the leader's start time, so a
reused pid is never mistaken for it. A record needs no fsync: it outlives the worker
process in the page cache, and a machine that goes down takes the processes with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from duragent.activities.tools.bash import process_group_alive

SWEEP_EVERY_S = 5.0
"""How often a worker sweeps this machine's records for dead workers' processes."""
SWEPT_KEPT_S = 600.0
"""How long a swept record stays for a next attempt to read (attempts come in seconds)."""
logger = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 2.0
"""How long to wait for a stopped group to disappear before reporting it stopped anyway."""

Fate = Literal["stopped", "ended", "elsewhere"]
"""What became of a recorded group: stopped now, already gone, or on another machine."""


class CallRecord(BaseModel):
    """What the next attempt needs to know about a call that was in progress here."""

    host: str
    began_at: float
    processes: list[dict[str, Any]] = []
    """`process_identity` of each group the call started, in order."""
    owner: dict[str, Any] | None = None
    """The worker process running the call: `{"pid", "started"}` (its start ticks)."""
    swept_at: float | None = None
    """When a sweep found its worker gone and stopped its processes."""
    swept: list[dict[str, Any]] = []
    """The identities that sweep stopped (the next attempt reports them stopped)."""


class ProcessRecords:
    """The records of tool calls in progress on this machine, one file each in `folder`."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def begin(self, key: str) -> CallRecord:
        """Record that the call `key` begins here, with no process yet."""
        pid = os.getpid()
        owner = {"pid": pid, "started": process_start_ticks(pid)}
        record = CallRecord(host=socket.gethostname(), began_at=time.time(), owner=owner)
        self._write(key, record)
        return record

    async def sweep(self, *, kept_s: float = SWEPT_KEPT_S) -> list[str]:
        """Stop the processes of calls whose worker process is gone; remove the records
        swept more than `kept_s` ago. Returns the keys swept now."""
        swept = []
        for path in sorted(self._folder.glob("*.json")):
            key = path.name.removesuffix(".json")
            record = self.read(key)
            if record is None or record.owner is None or _owner_alive(record.owner):
                continue
            if record.swept_at is None:
                fates = [(identity, await stop_orphan(identity)) for identity in record.processes]
                record.swept = [identity for identity, fate in fates if fate == "stopped"]
                record.swept_at = time.time()
                self._write(key, record)
                swept.append(key)
            elif time.time() - record.swept_at > kept_s:
                self.remove(key)
        return swept

    def add_process(self, key: str, record: CallRecord, identity: dict[str, Any]) -> None:
        """Add a process group to the call's record; it is on disk when this returns."""
        record.processes.append(identity)
        self._write(key, record)

    def read(self, key: str) -> CallRecord | None:
        try:
            return CallRecord.model_validate_json(self._path(key).read_bytes())
        except (OSError, ValidationError):
            return None  # never recorded, or the folder is not this worker's

    def remove(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def _write(self, key: str, record: CallRecord) -> None:
        # Write, then rename: a worker killed mid-write leaves the previous record whole.
        self._folder.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(record.model_dump_json())
        os.replace(partial, path)

    def _path(self, key: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", key):
            raise ValueError(f"not a tool call record key: {key!r}")
        return self._folder / f"{key}.json"


async def sweep_records(records: ProcessRecords, every_s: float = SWEEP_EVERY_S) -> None:
    """Sweep `records` now and every `every_s` until cancelled (a worker's lifetime)."""
    while True:
        try:
            swept = await records.sweep()
        except OSError as err:  # a folder gone or unreadable: try again next time
            logger.warning("sweeping tool process records failed: %s", err)
        else:
            if swept:
                logger.info("stopped the processes of %d call(s) of workers gone", len(swept))
        await asyncio.sleep(every_s)


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return True  # not ours to judge
    return process_start_ticks(pid) == owner.get("started")


def process_identity(pgid: int) -> dict[str, Any]:
    return {
        "pgid": pgid,
        "host": socket.gethostname(),
        "started": process_start_ticks(pgid),
        "at": time.time(),
    }


async def stop_orphan(identity: dict[str, Any]) -> Fate:
    """SIGKILL the recorded process group if it is still the same one, on this host, and
    wait (briefly) until it is gone."""
    pgid = identity.get("pgid")
    if not isinstance(pgid, int) or pgid <= 1:
        return "ended"
    if identity.get("host") != socket.gethostname():
        return "elsewhere"
    started = process_start_ticks(pgid)
    if started is not None and started != identity.get("started"):
        return "ended"  # the pid now belongs to another process
    # With the leader alive and the same, or gone while members of its group remain (a
    # group id cannot be handed to a new process while the group exists), it is ours.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return "ended"
    except PermissionError:
        return "ended"  # only members we may not signal are left
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    while process_group_alive(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return "stopped"


def process_start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so split after its ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None
