"""Moving a session to another host (`duragent move`): its workspace copied from the
host it was on when both are up, then the new host recorded (`workflows.session_move`)."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import WorkflowFailureError
from temporalio.exceptions import WorkflowAlreadyStartedError

from duragent.client.errors import DuragentError, InvalidHost, failure_text
from duragent.client.part import ClientPart
from duragent.domain.hosts import MoveInput, MoveResult, is_host_name
from duragent.workflows.session_move import SessionMove


class MoveRefused(DuragentError, ValueError):
    """A move that cannot be done as asked; nothing was changed."""


class MoveFailed(DuragentError):
    """A move that stopped part-way (a host not up, a workspace too large or not empty);
    the session stays on its host, as it was."""

    def __init__(self, session_id: str, host: str, reason: str) -> None:
        super().__init__(
            f"session {session_id} was not moved to host {host!r}: {reason}. It stays where it was."
        )


class Hosts(ClientPart):
    """Which host a session's tools run on, and moving it."""

    async def move(
        self,
        session_id: str,
        host: str,
        *,
        copy: bool = True,
        workspace: str | Path | None = None,
        start_within_s: float = 30.0,
    ) -> MoveResult:
        """Move an idle session to `host` (`SessionBusy` while a run is in progress):
        copy its workspace from its host when `copy` (both hosts' workers must be up),
        into `workspace` there (default: the same path), then record the new host.

        `copy=False` records the host (and folder) alone: for a workspace on storage
        both see, or a host that is gone for good. A session with no host yet has
        nothing to copy from: it gets `host`.
        """
        if not is_host_name(host):
            raise InvalidHost(host)
        if self._client.settings.shared_workspaces:
            raise MoveRefused(
                "workspaces are on storage every worker shares (DURAGENT_SHARED_WORKSPACES): "
                "sessions have no host to move from or to"
            )
        session = await self._client.sessions.get(session_id)
        target_folder = str(Path(workspace).expanduser()) if workspace else session.workspace
        if not Path(target_folder).is_absolute():
            raise MoveRefused(
                f"the workspace {target_folder!r} on host {host!r} is not an absolute path"
            )
        if session.host == host and target_folder == session.workspace:
            raise MoveRefused(f"session {session_id} is on host {host!r} already")
        data = MoveInput(
            session_id=session_id,
            target=host,
            source=session.host,
            workspace=session.workspace,
            target_workspace=target_folder,
            copy_files=copy and session.host is not None,
            start_within_s=start_within_s,
        )
        try:
            handle = await self._client.workflows.start(SessionMove.run, data, session_id, "move")
        except WorkflowAlreadyStartedError as err:
            raise await self._client.workflows.busy(session_id) from err
        try:
            result: MoveResult = await handle.result()
        except WorkflowFailureError as err:
            raise MoveFailed(session_id, host, failure_text(err)) from None
        return result
