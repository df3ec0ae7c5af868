"""What only a host's own worker can do: say that it is up, and pack or unpack one of its
workspaces for `duragent move` (the pieces travel through the store, which every host
reaches)."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from duragent.domain.hosts import (
    CHUNK_BYTES,
    DROP_TRANSFER,
    HOST_READY,
    MOVE_ERROR,
    PACK_WORKSPACE,
    RECORD_HOST,
    UNPACK_WORKSPACE,
    PackWorkspaceInput,
    PackWorkspaceResult,
    RecordHostInput,
    UnpackWorkspaceInput,
)
from duragent.store import sessions, transfers
from duragent.store.db import Database


def _refuse(message: str) -> ApplicationError:
    return ApplicationError(message, type=MOVE_ERROR, non_retryable=True)


class HostActivities:
    """The activities of a host's own queue besides its tool calls."""

    def __init__(self, host: str, db: Database) -> None:
        self._host = host
        self._db = db

    @activity.defn(name=HOST_READY)
    async def host_ready(self) -> str:
        return self._host

    @activity.defn(name=PACK_WORKSPACE)
    def pack_workspace(self, data: PackWorkspaceInput) -> PackWorkspaceResult:
        """The workspace as a gzipped tar in the store's pieces, if it is no larger than
        `data.max_bytes`. Symbolic links are kept as links (the unpacking refuses any
        that lead out of the workspace)."""
        root = Path(data.workspace)
        if not root.is_dir():
            raise _refuse(f"the workspace {root} is not a folder on host {self._host!r}")
        files, size = _measure(root)
        if size > data.max_bytes:
            raise _refuse(
                f"the workspace {root} holds {size / 2**20:.1f} MiB, more than the "
                f"{data.max_bytes / 2**20:.0f} MiB a move copies: copy it by other means, "
                "then move with --no-copy"
            )
        with tempfile.TemporaryFile() as packed:
            with tarfile.open(fileobj=packed, mode="w:gz") as tar:
                tar.add(root, arcname=".")
            packed.seek(0)
            with self._db.transaction() as db:
                transfers.drop_transfer(db, data.transfer_id)  # a retry starts afresh
                seq = 0
                while chunk := packed.read(CHUNK_BYTES):
                    transfers.put_chunk(db, data.transfer_id, seq, chunk)
                    seq += 1
                    activity.heartbeat()
        return PackWorkspaceResult(chunks=seq, files=files, bytes=size)

    @activity.defn(name=UNPACK_WORKSPACE)
    def unpack_workspace(self, data: UnpackWorkspaceInput) -> PackWorkspaceResult:
        """The packed workspace unpacked into `data.workspace`, which must be missing or
        empty; nothing in it may lead outside it (absolute paths, `..`, links out,
        devices: the `data` extraction filter)."""
        root = Path(data.workspace)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise _refuse(
                f"the folder {root} on host {self._host!r} is not an empty folder: move with "
                "--no-copy to use what is there, or --workspace to name another folder"
            )
        # Unpacked beside the target first, so a refused piece leaves no half workspace.
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{root.name}.moving-", dir=root.parent))
        try:
            with tempfile.TemporaryFile() as packed:
                with self._db.transaction() as db:
                    for chunk in transfers.read_chunks(db, data.transfer_id):
                        packed.write(chunk)
                        activity.heartbeat()
                packed.seek(0)
                try:
                    with tarfile.open(fileobj=packed, mode="r:gz") as tar:
                        tar.extractall(staging, filter="data")
                except (tarfile.TarError, OSError) as err:
                    raise _refuse(f"the packed workspace cannot be unpacked safely: {err}") from err
            files, size = _measure(staging)
            if root.exists():
                root.rmdir()
            os.replace(staging, root)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        with self._db.transaction() as db:
            transfers.drop_transfer(db, data.transfer_id)
        return PackWorkspaceResult(chunks=0, files=files, bytes=size)


class MoveBookkeeping:
    """The store steps of a move, on any worker."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @activity.defn(name=RECORD_HOST)
    def record_host(self, data: RecordHostInput) -> None:
        with self._db.transaction() as db:
            sessions.set_host(db, data.session_id, data.host, workspace=data.workspace)

    @activity.defn(name=DROP_TRANSFER)
    def drop_transfer(self, transfer_id: str) -> None:
        with self._db.transaction() as db:
            transfers.drop_transfer(db, transfer_id)


def _measure(root: Path) -> tuple[int, int]:
    """How many files the folder holds and their sizes summed (links not followed)."""
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            files += 1
            size += info.st_size
    return files, size
