"""Sessions (`client.sessions`): create and fork them, read them from the store, and
their status (asked of the open run's worker, else read from the store)."""

from __future__ import annotations

import builtins
import contextlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session
from temporalio.service import RPCError

from duragent.activities.resources import load_resources
from duragent.client.bounds import bounded
from duragent.client.errors import (
    EntryNotInSession,
    InvalidChange,
    InvalidHost,
    InvalidWorkspace,
    SessionNotFound,
)
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.client.workspaces import WorkspacePolicy
from duragent.domain.config import SessionConfig
from duragent.domain.context import derive_path_state
from duragent.domain.cost import SessionCosts, session_costs
from duragent.domain.entries import SessionInfoEntry
from duragent.domain.hosts import is_host_name
from duragent.domain.models import UnknownModel, parse_model
from duragent.domain.resources import ResourceKind
from duragent.domain.runs import Phase, RunView
from duragent.store import entries, input_queue, runs, sessions
from duragent.store.clock import now_ms
from duragent.store.errors import EntryNotFound as StoreEntryNotFound
from duragent.store.errors import SessionNotFound as StoreSessionNotFound
from duragent.store.fork import fork_session
from duragent.store.metrics import StoreFigures, store_figures
from duragent.store.records import QueueItem, RunRecord, SessionRecord

if TYPE_CHECKING:
    from duragent.client.agent import Agent

STRUCTURAL_PHASES: dict[str, Phase] = {
    "SessionCompaction": "compaction",
    "SessionNavigation": "branch_summary",
}


@dataclass(frozen=True)
class SessionStatus:
    phase: Phase
    config: SessionConfig
    """The latest config (what getters return)."""
    run: RunView | None
    """The open run's view: queues and pending writes. None when idle."""
    next_turn: list[QueueItem]
    """Messages waiting for the next run."""
    host: str | None = None
    """The session's host (`domain.hosts`); None until its first run, or shared."""

    @property
    def awaiting_host(self) -> str | None:
        """The host the run waits for (phase `awaiting_host`), else None."""
        if self.phase != "awaiting_host":
            return None
        return (self.run.awaiting_host if self.run else None) or self.host


def current_config(db: Session, session: SessionRecord) -> SessionConfig:
    """The session's latest config as the store has it: its stored config (session-wide
    settings, and the defaults of the branch-scoped ones) with what the path to its leaf
    set (`domain.config.BRANCH_SCOPED`)."""
    state = derive_path_state(entries.load_config_path(db, session.leaf_id), session.config)
    # dict(state), not model_dump(): nested models (the approval policy) stay models.
    return session.config.model_copy(update=dict(state))


class SyncSessions(SyncPart):
    """Sessions in the store (`client.sync.sessions`): new ones, forks, reads (which work
    while no worker runs)."""

    def create(
        self,
        *,
        workspace: Path | str | None = None,
        name: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        owner: str | None = None,
        policy: WorkspacePolicy | None = None,
        host: str | None = None,
        config: SessionConfig | None = None,
        session_id: str | None = None,
        agent: str | Agent[Any, Any] | None = None,
    ) -> SessionRecord:
        """A new idle session working in `workspace` (default: a fresh folder under the
        state directory), created if missing. `config` (another session's, say) is its
        whole config; else it is made from `model` and `system_prompt` (`new_config`).
        `session_id` (default: a new one) is for a caller that may ask twice and looks
        for its session by it first (a retried activity). `agent` (an agent, or the name
        of one the plugins bring: `AgentNotFound` otherwise) makes it a session of that
        agent: its model (unless `model` is given), instructions and tools.

        `host` names the host whose workers run its tools (`domain.hosts`); by default its
        first run's worker's host. The workspace is a folder on that host: it is created
        here only when that is this machine.

        With a `policy` (the HTTP API's) the workspace is what the policy allows `owner`
        (`WorkspaceNotAllowed` otherwise); without one it is any folder (the local CLI).
        Nothing is created or stored when an argument is refused.
        """
        settings = self._client.settings
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
        if model is not None:
            try:
                parse_model(model)
            except UnknownModel as err:
                raise InvalidChange(f"model: {err}") from None
        session_id = session_id or uuid.uuid4().hex
        if config is None and agent is not None:
            config = self.agent_config(agent, model)
        config = config or self.new_config(model, system_prompt)
        folder = self.new_workspace(session_id, workspace, owner=owner, policy=policy, host=host)
        with self._client.db.transaction() as db:
            return sessions.create_session(
                db,
                session_id=session_id,
                workspace=str(folder),
                config=config,
                name=name,
                owner=owner,
                host=None if settings.shared_workspaces else host,
            )

    def new_workspace(
        self,
        session_id: str,
        workspace: Path | str | None,
        *,
        owner: str | None,
        policy: WorkspacePolicy | None,
        host: str | None = None,
    ) -> Path:
        """The workspace folder of a new session (see `create`), made when `host` is this
        machine's (or None); `InvalidWorkspace` (`WorkspaceNotAllowed`) when it cannot be."""
        settings = self._client.settings
        if policy is not None:
            if owner is None:
                raise ValueError("a workspace policy needs the session's owner")
            folder = policy.resolve(
                owner, None if workspace is None else str(workspace), session_id
            )
        else:
            folder = Path(workspace) if workspace else settings.workspaces / session_id
            folder = folder.expanduser().resolve()
        try:
            if host in (None, settings.host):
                folder.mkdir(parents=True, exist_ok=True)
                # Checked before it was made: a symlink put in its path meanwhile would
                # lead its tools elsewhere (workers check again before each tool call).
                if folder.resolve(strict=True) != folder:
                    raise InvalidWorkspace(str(workspace or folder), "changed while it was made")
        except OSError as err:
            raise InvalidWorkspace(str(workspace or folder), f"cannot be created ({err})") from err
        return folder

    def agent_config(self, agent: str | Agent[Any, Any], model: str | None = None) -> SessionConfig:
        """The config of a new session of `agent` (or of the agent of that name), with
        `model` instead of the agent's when given."""
        if isinstance(agent, str):
            agent = self._client.plugins.agent(agent)
        config = agent.session_config(self._client.settings.model)
        return config.model_copy(update={"model": model}) if model is not None else config

    def new_config(
        self, model: str | None = None, system_prompt: str | None = None
    ) -> SessionConfig:
        """A new session's config: what the caller gives, else the plugins' defaults
        (`client.plugins`), else the settings' model (a model set in the settings, not
        left at its default, wins over the plugins')."""
        settings, plugins = self._client.settings, self._client.plugins
        if model is None and "model" not in settings.model_fields_set:
            model = plugins.default("model")
        config = SessionConfig(model=model or settings.model)
        update = {
            "system_prompt": system_prompt or plugins.default("system_prompt"),
            "active_tools": plugins.default("active_tools"),
        }
        given = {key: value for key, value in update.items() if value is not None}
        if "active_tools" in given:
            given["active_tools"] = list(given["active_tools"])
        return config.model_copy(update=given) if given else config

    def discard_unused(self, session_id: str) -> bool:
        """Delete a session its caller made and could not use (its run did not start), if
        nothing was stored in it since (`store.sessions.delete_unused`), and its workspace
        folder if that is still empty. True if it was deleted."""
        with self._client.db.transaction() as db:
            record = sessions.get_session(db, session_id)
            deleted = record is not None and sessions.delete_unused(db, session_id)
        if deleted and record is not None:
            with contextlib.suppress(OSError):  # not empty, or not on this machine: kept
                Path(record.workspace).rmdir()
        return deleted

    def fork(self, session_id: str, entry_id: str, *, name: str | None = None) -> SessionRecord:
        """A new session continuing from `entry_id` of this one (its path copied)."""
        if name is not None:
            bounded("session name", name)
        self.get(session_id)
        with self._client.db.transaction() as db:
            try:
                return fork_session(db, session_id, entry_id, name=name)
            except StoreEntryNotFound as err:
                raise EntryNotInSession(session_id, entry_id) from err

    def get(self, session_id: str) -> SessionRecord:
        """The session's record; `SessionNotFound` for an id no session has."""
        with self._client.db.transaction() as db:
            try:
                return sessions.require_session(db, session_id)
            except StoreSessionNotFound as err:
                raise SessionNotFound(session_id) from err

    def list(
        self, *, owner: str | None = None, unowned: bool = False, limit: int = 100
    ) -> builtins.list[SessionRecord]:
        """The newest sessions (of `owner`, and then with `unowned` those of no owner)."""
        with self._client.db.transaction() as db:
            return sessions.list_sessions(db, owner=owner, unowned=unowned, limit=limit)

    def summaries(
        self, *, owner: str | None = None, unowned: bool = False, limit: int = 100
    ) -> builtins.list[tuple[SessionRecord, RunRecord | None]]:
        """Sessions, most recently active first, each with its latest run (None before
        its first): a session list's status without asking Temporal about each one."""
        with self._client.db.transaction() as db:
            listed = sessions.list_sessions(db, owner=owner, unowned=unowned, limit=limit)
            return [(s, next(iter(runs.list_runs(db, s.id, limit=1)), None)) for s in listed]

    def children(self, session_id: str) -> builtins.list[SessionRecord]:
        """The session's sub-agents: sessions its runs' `delegate` calls made, oldest first;
        each names the run (`parent_run_id`) and the call (`parent_tool_call_id`)."""
        self.get(session_id)
        with self._client.db.transaction() as db:
            return sessions.children(db, session_id)

    def parent(self, session_id: str) -> SessionRecord | None:
        """The session whose `delegate` call made this one; None for any other session."""
        session = self.get(session_id)
        if session.parent_tool_call_id is None or session.parent_session_id is None:
            return None
        with self._client.db.transaction() as db:
            return sessions.get_session(db, session.parent_session_id)

    def costs(self, session_id: str) -> SessionCosts:
        """What the session's runs cost, each and together, priced per model from the
        assistant messages they stored (`store.usage`) with `client.prices`."""
        self.get(session_id)
        with self._client.db.transaction() as db:
            by_run = self._client.usage_tally.read(db, session_id)
        return session_costs(by_run, self._client.prices)

    def resources(self, session_id: str, kind: ResourceKind) -> builtins.list[str]:
        """Names of the skills (or templates) a run of the session can invoke, looked up
        as a worker does: the workspace's `.duragent/`, then `$DURAGENT_HOME/resources/`."""
        workspace = Path(self.get(session_id).workspace)
        found = load_resources(workspace, self._client.settings.resources_dir)
        return sorted(resource.name for resource in found if resource.kind == kind)

    def figures(self) -> StoreFigures:
        """What the store says now (sessions, runs in progress by phase, input waiting,
        approvals waiting): the API's metrics, counted at each scrape."""
        with self._client.db.transaction() as db:
            return store_figures(db)

    def stored_status(
        self, session_id: str
    ) -> tuple[SessionConfig, builtins.list[QueueItem], builtins.list[RunRecord]]:
        """What the store alone says of a session's status: its latest config (the
        session's, with what its current path set), next-turn input, and runs marked
        running."""
        session = self.get(session_id)
        with self._client.db.transaction() as db:
            waiting = input_queue.list_items(db, session_id, kind="next_turn")
            config = current_config(db, session)
            running = runs.running_runs(db, session_id)
        return config, waiting, running

    def configs(self, records: Iterable[SessionRecord]) -> builtins.list[SessionConfig]:
        """Each session's latest config, as `status` has it when no run is open: its
        stored config with what its current branch set (model, thinking level, tools,
        approval policy). A record's own `config` holds only the defaults its branches
        start from, so a session list that shows a model reads it here."""
        with self._client.db.transaction() as db:
            return [current_config(db, record) for record in records]


class Sessions(StoreBackedPart[SyncSessions]):
    """Sessions: new ones, forks, store reads (which work while no worker runs), status."""

    create = in_thread(SyncSessions.create)
    discard_unused = in_thread(SyncSessions.discard_unused)
    fork = in_thread(SyncSessions.fork)
    get = in_thread(SyncSessions.get)
    list = in_thread(SyncSessions.list)
    summaries = in_thread(SyncSessions.summaries)
    children = in_thread(SyncSessions.children)
    parent = in_thread(SyncSessions.parent)
    costs = in_thread(SyncSessions.costs)
    resources = in_thread(SyncSessions.resources)
    figures = in_thread(SyncSessions.figures)
    stored_status = in_thread(SyncSessions.stored_status)
    configs = in_thread(SyncSessions.configs)

    async def rename(self, session_id: str, name: str) -> None:
        """Name the session (a session-info entry: pending while a run is open)."""
        bounded("session name", name)
        entry = SessionInfoEntry(id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), name=name)
        await self._client.writes.apply(session_id, entries=[entry])

    async def phase(self, session_id: str) -> Phase:
        """The session's phase: `idle` unless a run or a structural operation is open."""
        return (await self.status(session_id)).phase

    async def status(self, session_id: str) -> SessionStatus:
        """Phase, latest config, queued messages and pending writes of a session, and its
        host (with the host a run waits for, in phase `awaiting_host`).

        A run is asked directly (a query); when no worker answers in time (all are down),
        the phase comes from the stored run state and the queues are unknown (`run` None).
        """
        config, waiting, running = await self.stored_status(session_id)
        host = (await self.get(session_id)).host
        workflows = self._client.workflows
        open_type = await workflows.open_type(session_id)
        if open_type in STRUCTURAL_PHASES:
            return SessionStatus(STRUCTURAL_PHASES[open_type], config, None, waiting, host)
        if open_type != "SessionRun":
            return SessionStatus("idle", config, None, waiting, host)
        try:
            view = await workflows.query_state(session_id)
        except (RPCError, TimeoutError):
            view = None
        if view is None:
            phase: Phase = running[0].phase if running else "turn"
            return SessionStatus(phase, config, None, waiting, host)
        return SessionStatus(view.phase, view.config or config, view, waiting, host)

    async def worker_answering(self, session_id: str) -> bool | None:
        """Whether a worker answers for the session's open run (None when no run is open).
        A run that no worker answers makes no progress until a worker is back."""
        try:
            view = await self._client.workflows.query_state(session_id)
        except (RPCError, TimeoutError):
            return False
        return None if view is None else True
