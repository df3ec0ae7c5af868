"""Sessions made from nothing or from another session's path (store-only writes: no
workflow knows a session before it exists)."""

from __future__ import annotations

import uuid
from pathlib import Path

from duragent.client.bounds import bounded
from duragent.client.errors import EntryNotInSession, InvalidHost, InvalidWorkspace
from duragent.client.session_reads import SessionReads
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.config import SessionConfig
from duragent.domain.hosts import is_host_name
from duragent.store import sessions
from duragent.store.errors import EntryNotFound as StoreEntryNotFound
from duragent.store.fork import fork_session
from duragent.store.records import SessionRecord


class NewSessions(SessionReads):
    """Create and fork sessions."""

    def create_session(
        self,
        *,
        workspace: Path | str | None = None,
        name: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        owner: str | None = None,
        policy: WorkspacePolicy | None = None,
        host: str | None = None,
    ) -> SessionRecord:
        """A new idle session working in `workspace` (default: a fresh folder under the
        state directory), created if missing.

        `host` names the host whose workers run its tools (`domain.hosts`); by default its
        first run's worker's host. The workspace is a folder on that host: it is created
        here only when that is this machine.

        With a `policy` (the HTTP API's) the workspace is what the policy allows `owner`
        (`WorkspaceNotAllowed` otherwise); without one it is any folder (the local CLI).
        Nothing is created or stored when an argument is refused.
        """
        if host is not None and not is_host_name(host):
            raise InvalidHost(host)
        for what, text in (
            ("workspace", workspace),
            ("session name", name),
            ("model", model),
            ("system prompt", system_prompt),
        ):
            if text is not None:
                bounded(what, str(text))
        session_id = uuid.uuid4().hex
        config = self._new_config(model, system_prompt)
        if policy is not None:
            if owner is None:
                raise ValueError("a workspace policy needs the session's owner")
            folder = policy.resolve(
                owner, None if workspace is None else str(workspace), session_id
            )
        else:
            folder = Path(workspace) if workspace else self.settings.workspaces / session_id
            folder = folder.expanduser().resolve()
        try:
            if host in (None, self.settings.host):
                folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InvalidWorkspace(str(workspace or folder), f"cannot be created ({err})") from err
        with self.db.transaction() as db:
            return sessions.create_session(
                db,
                session_id=session_id,
                workspace=str(folder),
                config=config,
                name=name,
                owner=owner,
                host=None if self.settings.shared_workspaces else host,
            )

    def _new_config(self, model: str | None, system_prompt: str | None) -> SessionConfig:
        """A new session's config: what the caller gives, else the plugins' defaults
        (`client.plugins`), else the settings' model (a model set in the settings, not
        left at its default, wins over the plugins')."""
        plugins = self.plugins
        if model is None and "model" not in self.settings.model_fields_set:
            model = plugins.default("model")
        config = SessionConfig(model=model or self.settings.model)
        update = {
            "system_prompt": system_prompt or plugins.default("system_prompt"),
            "active_tools": plugins.default("active_tools"),
        }
        given = {key: value for key, value in update.items() if value is not None}
        if "active_tools" in given:
            given["active_tools"] = list(given["active_tools"])
        return config.model_copy(update=given) if given else config

    def fork(self, session_id: str, entry_id: str, *, name: str | None = None) -> SessionRecord:
        """A new session continuing from `entry_id` of this one (its path copied)."""
        if name is not None:
            bounded("session name", name)
        self.get_session(session_id)
        with self.db.transaction() as db:
            try:
                return fork_session(db, session_id, entry_id, name=name)
            except StoreEntryNotFound as err:
                raise EntryNotInSession(session_id, entry_id) from err
