"""Portable sessions (`client.session_files`): export a session's whole tree as a file,
import one (ours or pi's) as a new session of this deployment (`domain.session_file`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from duragent.client.bounds import bounded
from duragent.client.errors import IdsInUse, InvalidSessionName, SessionNotFound
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.client.sessions import current_config
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.session_file import (
    ExportedSession,
    ExportHeader,
    ExportSource,
    export_lines,
    file_ids,
    read_session_file,
    stored_entries,
)
from duragent.domain.session_file_checks import MAX_NAME_CHARS, ImportNote, check_id
from duragent.store import sessions
from duragent.store.clock import now_ms
from duragent.store.errors import SessionNotFound as StoreSessionNotFound
from duragent.store.records import SessionRecord
from duragent.store.session_files import IdsTaken, exported_entries, store_imported, taken_ids


@dataclass(frozen=True)
class Imported:
    session: SessionRecord
    entries: int
    kind: str
    """The file's format: `duragent` or `pi`."""
    notes: list[ImportNote] = field(default_factory=list)
    """What of the file was dropped, kept as custom entries or changed, each with how
    often (a pi file's fields and entries with no place here; none for an export)."""


class SyncSessionFiles(SyncPart):
    """Export and import whole sessions (`client.sync.session_files`)."""

    def export(self, session_id: str) -> list[str]:
        """The session as the lines of a `duragent-session` file (each ends in a newline):
        what is stored now (a run in progress: up to its last save point)."""
        with self._client.db.transaction() as db:
            try:
                record = sessions.require_session(db, session_id)
            except StoreSessionNotFound as err:
                raise SessionNotFound(session_id) from err
            stored = exported_entries(db, session_id)
            config = current_config(db, record)
        header = ExportHeader(
            version=1,
            source=ExportSource(
                app_version=version("duragent"), session_id=record.id, exported_at=now_ms()
            ),
            session=ExportedSession(
                name=record.name,
                config=config,
                leaf_id=record.leaf_id,
                created_at=record.created_at,
            ),
            entries=len(stored),
        )
        return list(export_lines(header, stored))

    def import_file(
        self,
        data: bytes,
        *,
        keep_ids: bool = False,
        name: str | None = None,
        workspace: Path | str | None = None,
        owner: str | None = None,
        policy: WorkspacePolicy | None = None,
    ) -> Imported:
        """A new session from a file's bytes (`read_session_file`: ours or pi's; checked
        whole first, `SessionFileRefused` naming the line and the reason), stored in one
        transaction. Its ids are new unless `keep_ids` (the file's, refused with
        `IdsInUse` when this store has any of them). `Imported.notes` says what of the
        file was dropped, kept as custom entries or changed. `workspace` as
        `sessions.create` takes it (a fresh folder by default); the config is the file's
        (pi's files have none: this deployment's defaults, with the model pi resumes the
        file's leaf with)."""
        if workspace is not None:
            bounded("workspace", str(workspace))
        file = read_session_file(data)
        if name is not None and not 0 < len(name) <= MAX_NAME_CHARS:
            raise InvalidSessionName(name)
        if keep_ids:
            session_id = check_id(file.source_id, "the session id", 1)
            stored, leaf_id = stored_entries(file), file.leaf_id
            with self._client.db.transaction() as db:
                taken = taken_ids(db, session_id, [s.entry.id for s in stored])
            if taken:
                raise IdsInUse(taken, session_id)
        else:
            entry_ids, run_ids = file_ids(file)
            ids = {old: uuid.uuid4().hex for old in entry_ids}
            runs = {old: uuid.uuid4().hex for old in run_ids}
            session_id = uuid.uuid4().hex
            stored = stored_entries(file, ids, runs)
            leaf_id = ids[file.leaf_id] if file.leaf_id is not None else None
        config = file.config or self._client.sync.sessions.new_config()
        if file.config is None and file.model is not None:
            config = config.model_copy(update={"model": file.model})
        folder = self._client.sync.sessions.new_workspace(
            session_id, workspace, owner=owner, policy=policy
        )
        try:
            with self._client.db.transaction() as db:
                record = store_imported(
                    db,
                    session_id=session_id,
                    workspace=str(folder),
                    config=config,
                    name=name or file.name,
                    owner=owner,
                    host=None,
                    leaf_id=leaf_id,
                    stored=stored,
                    check_ids=keep_ids,
                    # Moved (its ids kept), it is the session it was; copied, a new one.
                    created_at=file.created_at if keep_ids else None,
                )
        except IdsTaken as err:  # taken between the check above and this transaction
            raise IdsInUse(err.taken, session_id) from err
        return Imported(session=record, entries=len(stored), kind=file.kind, notes=file.notes)


class SessionFiles(StoreBackedPart[SyncSessionFiles]):
    """Export and import whole sessions."""

    export = in_thread(SyncSessionFiles.export)
    import_file = in_thread(SyncSessionFiles.import_file)
