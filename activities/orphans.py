"""Processes a dead worker left behind: found again from heartbeat details, stopped.

A tool that started a process group records it (with the host and the process's start
time, so a reused pid is never mistaken for it) in its heartbeat details. When the
worker dies, the process keeps running; the call's next attempt, if it lands on the
same host, stops the group before reporting the call as interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from typing import Any


def process_identity(pgid: int) -> dict[str, Any]:
    return {"pgid": pgid, "host": socket.gethostname(), "started": _start_ticks(pgid)}


def stop_orphan(identity: dict[str, Any]) -> bool:
    """SIGKILL the recorded process group if it is still the same one, on this host."""
    pgid = identity.get("pgid")
    if not isinstance(pgid, int) or identity.get("host") != socket.gethostname():
        return False
    started = _start_ticks(pgid)
    if started is None or started != identity.get("started"):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
        return True
    return False


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so split after its ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None
