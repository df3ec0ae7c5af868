"""Hosts: where a session's workspace lives, and the task queue its tool calls go to.

A worker polls the shared task queue (workflows, model calls, store work) and, unless
workspaces are on storage every worker shares, the queue of its own host, where only tool
calls go. A session records its host; its runs send their tool calls to that host's queue.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

HOST_NAME_RULE = "1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9._-]+")
HOST_QUEUE_INFIX = "-host-"


def is_host_name(name: str) -> bool:
    return _HOST_NAME.fullmatch(name) is not None


def sanitized_host_name(name: str) -> str:
    """A machine's name made into a host name: characters outside the rule become '-',
    cut to 63 characters; `localhost` when nothing is left."""
    cleaned = _NOT_IN_NAME.sub("-", name).strip("-._")[:63].rstrip("-._")
    return cleaned if is_host_name(cleaned) else "localhost"


def host_task_queue(task_queue: str, host: str) -> str:
    """The task queue of `host`'s tool calls: `<task_queue>-host-<host>`."""
    return f"{task_queue}{HOST_QUEUE_INFIX}{host}"


def host_gone_message(host: str, waited_s: float) -> str:
    """Why a run ended when its session's host did not come back in time."""
    return (
        f"host {host!r} was gone: no worker of it took the session's tool call within "
        f"{_duration(waited_s)} (DURAGENT_HOST_WAIT). The run's finished work is saved; "
        f"start that host's worker and prompt again, or move the session to another host "
        f"(duragent move SESSION HOST)"
    )


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


HOST_READY = "host_ready"
"""The activity a host's worker answers at once with its name: the host is up."""
PACK_WORKSPACE = "pack_workspace"
UNPACK_WORKSPACE = "unpack_workspace"
MOVE_MAX_BYTES = 256 * 1024 * 1024
"""The most a move copies (the files' sizes summed): more is copied by other means, then
moved with `--no-copy`."""
CHUNK_BYTES = 4 * 1024 * 1024


class PackWorkspaceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transfer_id: str
    workspace: str
    max_bytes: int = MOVE_MAX_BYTES


class PackWorkspaceResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    chunks: int
    files: int
    bytes: int
    """The files' sizes summed (before compression)."""


class UnpackWorkspaceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transfer_id: str
    workspace: str
    """The folder on the target host: missing or empty."""


class MoveInput(BaseModel):
    """What `SessionMove` does: copy the workspace from `source` to `target` (unless
    `copy` is false), then record `target` as the session's host."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    target: str
    source: str | None
    workspace: str
    """The folder on the source host."""
    target_workspace: str
    """The folder on the target host (usually the same path)."""
    copy_files: bool = True
    start_within_s: float = 30.0
    """How soon a host's worker must take its part, or the host counts as not up."""


class MoveResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    host: str
    workspace: str
    copied_files: int = 0
    copied_bytes: int = 0


class RecordHostInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str
    host: str
    workspace: str


RECORD_HOST = "record_host"
DROP_TRANSFER = "drop_transfer"
MOVE_ERROR = "WorkspaceMoveError"
