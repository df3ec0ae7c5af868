"""Portable sessions over HTTP: a session's file (`GET .../export`, JSON Lines) and a new
session from one (`POST /api/sessions/import`, the file as the body).

An export is the owner's only (another user's session is not found, as everywhere); an
import belongs to the user who sends it, in a workspace the policy gives them. A body
over `MAX_IMPORT_BYTES` is refused (413) before it is read; a file that is refused is a
422 naming the line and the reason, and nothing is stored; ids kept that are in use, a
409. The answer says what of the file was dropped, kept as custom entries or changed.
"""

# No `from __future__ import annotations`: FastAPI must see the local `User` dependency
# in the route signatures as an object, not as a name to look up in this module.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict

from duragent.api.ownership import owned_session
from duragent.client.api import DuragentClient
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.session_file import MEDIA_TYPE
from duragent.domain.session_file_checks import MAX_FILE_BYTES, MAX_NAME_CHARS, ImportNote
from duragent.store.records import SessionRecord

IMPORT_PATH = "/api/sessions/import"
MAX_IMPORT_BYTES = MAX_FILE_BYTES
"""The import's body is a whole session file: bounded by what a file may be, not by the
limit on one text."""
IMPORT_TOO_LARGE = (
    f"request body is over {MAX_IMPORT_BYTES} bytes, the most a session file may be "
    f"({MAX_IMPORT_BYTES // (1024 * 1024)} MiB); nothing was imported"
)


class ImportResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session: SessionRecord
    entries: int
    format: str
    """The file's: `duragent` (an export) or `pi` (a pi session file)."""
    notes: list[ImportNote]
    """What of the file was dropped, kept as custom entries or changed, with how often."""


def session_file_routes(
    client: DuragentClient, current_user: Callable[..., str], policy: WorkspacePolicy
) -> APIRouter:
    router = APIRouter()
    User = Annotated[str, Depends(current_user)]

    @router.get("/api/sessions/{session_id}/export")
    async def export(session_id: str, owner: User) -> Response:
        """The session's whole tree as a `duragent-session` file (JSON Lines)."""
        await owned_session(client, session_id, owner)
        lines = await client.session_files.export(session_id)
        return Response(
            "".join(lines),
            media_type=MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{session_id}.jsonl"'},
        )

    @router.post(IMPORT_PATH, status_code=201)
    async def import_session(
        request: Request,
        owner: User,
        keep_ids: Annotated[bool, Query()] = False,
        name: Annotated[str | None, Query(min_length=1, max_length=MAX_NAME_CHARS)] = None,
        workspace: Annotated[str | None, Query(max_length=4096)] = None,
    ) -> ImportResult:
        """A new session of the user's from the body: a session file (an export, or a pi
        session file), checked whole, then stored in one transaction."""
        data = await request.body()
        imported = await client.session_files.import_file(
            data,
            keep_ids=keep_ids,
            name=name,
            workspace=workspace,
            owner=owner,
            policy=policy,
        )
        return ImportResult(
            session=imported.session,
            entries=imported.entries,
            format=imported.kind,
            notes=imported.notes,
        )

    return router
