"""The Python client: create sessions, prompt them, wait, follow their events."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.resources import load_resources
from activities.tools import default_tool_names
from client.connection import connect_temporal, open_store
from client.errors import (
    DuragentError,
    EntryNotInSession,
    InputTooLarge,
    InvalidChange,
    InvalidPrompt,
    InvalidWorkspace,
    QueueItemNotFound,
    QueueItemNotPending,
    ResourceNotFound,
    SessionBusy,
    SessionIdle,
    SessionNotFound,
    TemporalUnreachable,
)
from client.workspaces import WorkspacePolicy
from domain.changes import ConfigChange, FacadeEntry, SessionChange
from domain.compaction import CompactionSettings
from domain.config import QueueMode, SessionConfig, ThinkingLevel, check_tool_names
from domain.context import derive_path_state
from domain.entries import (
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    SessionEntry,
    SessionInfoEntry,
)
from domain.guidance import GuidanceIntent, GuidanceItem, classify
from domain.input import MAX_INPUT_BYTES, PromptInput, input_bytes, normalize_prompt_input
from domain.messages import AgentMessage, TextContent, UserMessage, text_of
from domain.queues import QueuedMessage
from domain.resources import ResourceKind
from domain.runs import (
    Invocation,
    Phase,
    RunInput,
    RunKind,
    RunOptions,
    RunResult,
    RunView,
    session_workflow_id,
)
from domain.tree_ops import CompactInput, CompactResult, NavigateInput, NavigateResult
from settings import Settings
from store import display, entries, events, input_queue, runs, sessions
from store.clock import now_ms
from store.db import Database
from store.errors import EntryNotFound as StoreEntryNotFound
from store.errors import SessionNotFound as StoreSessionNotFound
from store.fork import fork_session
from store.records import DisplayMessage, QueueItem, RunRecord, SessionRecord, StoredEvent
from workflows.session_changes import SessionChanges
from workflows.session_run import SessionRun
from workflows.session_structure import SessionCompaction, SessionNavigation

SESSION_ID_ATTR = SearchAttributeKey.for_keyword("DuragentSessionId")
RUN_ID_ATTR = SearchAttributeKey.for_keyword("DuragentRunId")
KIND_ATTR = SearchAttributeKey.for_keyword("DuragentKind")

EVENT_POLL_S = 0.05
# A run whose outcome is stored has one workflow step left; it is waited for this long.
_CLOSING_WAIT_S = 10.0
QUERY_TIMEOUT = timedelta(seconds=3)
"""A query needs a worker; when none answers this soon, the store is asked instead."""
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


@dataclass(frozen=True)
class RunHandle:
    session_id: str
    run_id: str
    workflow: WorkflowHandle[SessionRun, RunResult]

    async def result(self) -> RunResult:
        return await self.workflow.result()


class DuragentClient:
    def __init__(
        self,
        temporal: Client,
        db: Database,
        settings: Settings,
        *,
        tool_names: Sequence[str] | None = None,
    ) -> None:
        self.temporal = temporal
        self.db = db
        self.settings = settings
        self.tool_names = list(tool_names) if tool_names is not None else default_tool_names()
        """The tools a session's active tools may name: the workers' built-in ones, unless
        the workers register others (`build_worker(tools=...)`): then pass those."""

    @classmethod
    async def connect(cls, settings: Settings) -> DuragentClient:
        try:
            temporal = await connect_temporal(settings)
        except RuntimeError as err:
            raise TemporalUnreachable(settings.temporal_address, str(err)) from err
        return cls(temporal, open_store(settings), settings)

    # Sessions -------------------------------------------------------------------------

    def create_session(
        self,
        *,
        workspace: Path | str | None = None,
        name: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        owner: str | None = None,
        policy: WorkspacePolicy | None = None,
    ) -> SessionRecord:
        """A new idle session working in `workspace` (default: a fresh folder under the
        state directory), created if missing.

        With a `policy` (the HTTP API's) the workspace is what the policy allows `owner`
        (`WorkspaceNotAllowed` otherwise); without one it is any folder (the local CLI).
        Nothing is created or stored when an argument is refused.
        """
        for what, text in (
            ("workspace", workspace),
            ("session name", name),
            ("model", model),
            ("system prompt", system_prompt),
        ):
            if text is not None:
                bounded(what, str(text))
        session_id = uuid.uuid4().hex
        config = SessionConfig(model=model or self.settings.model)
        if system_prompt is not None:
            config = config.model_copy(update={"system_prompt": system_prompt})
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
            )

    def get_session(self, session_id: str) -> SessionRecord:
        with self.db.transaction() as db:
            try:
                return sessions.require_session(db, session_id)
            except StoreSessionNotFound as err:
                raise SessionNotFound(session_id) from err

    def list_sessions(self, *, owner: str | None = None, limit: int = 100) -> list[SessionRecord]:
        with self.db.transaction() as db:
            return sessions.list_sessions(db, owner=owner, limit=limit)

    def entries(self, session_id: str) -> list[SessionEntry]:
        """Every entry of the session tree, in the order they were stored."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return entries.list_entries(db, session_id)

    def path(self, session_id: str) -> list[SessionEntry]:
        """The current branch: entries from the root to the session's leaf."""
        session = self.get_session(session_id)
        with self.db.transaction() as db:
            return entries.load_path(db, session.leaf_id)

    def display_messages(self, session_id: str, *, after: int = 0) -> list[DisplayMessage]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return display.list_display(db, session_id, after=after)

    def runs(self, session_id: str) -> list[RunRecord]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return runs.list_runs(db, session_id)

    def cursor(self, session_id: str) -> int:
        """The session's newest event seq (numbered per session from 1): follow from here
        to see only what comes next."""
        with self.db.transaction() as db:
            return events.latest_seq(db, session_id)

    def run_state(self, run_id: str) -> RunRecord | None:
        with self.db.transaction() as db:
            return runs.get_run(db, run_id)

    # Runs -----------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        prompt: PromptInput,
        *,
        max_turns: int | None = None,
        options: RunOptions | None = None,
    ) -> RunHandle:
        """Start a run of the session with this prompt; `SessionBusy` if one is open."""
        self.get_session(session_id)
        try:
            messages = normalize_prompt_input(prompt, now_ms())
        except ValueError as err:
            raise InvalidPrompt(str(err)) from err
        bounded("prompt", prompt if isinstance(prompt, str) else messages)
        return await self._start(session_id, messages, None, max_turns, options)

    async def skill(
        self, session_id: str, name: str, args: Sequence[str] = (), **kwargs: Any
    ) -> RunHandle:
        """Run the skill `name` (a markdown file in the session's skills) with `args`;
        `ResourceNotFound` (listing the skills there are) before any run starts."""
        invocation = Invocation(kind="skill", name=name, args=list(args))
        bounded("skill invocation", invocation)
        self._require_resource(session_id, "skill", name)
        return await self._start(session_id, [], invocation, **kwargs)

    async def prompt_from_template(
        self, session_id: str, name: str, args: Sequence[str] = (), **kwargs: Any
    ) -> RunHandle:
        """Run the prompt template `name` with positional `args` ($1, $2, $@);
        `ResourceNotFound` (listing the templates there are) before any run starts."""
        invocation = Invocation(kind="template", name=name, args=list(args))
        bounded("template invocation", invocation)
        self._require_resource(session_id, "template", name)
        return await self._start(session_id, [], invocation, **kwargs)

    def resources(self, session_id: str, kind: ResourceKind) -> list[str]:
        """Names of the skills (or templates) a run of the session can invoke, looked up
        as a worker does: the workspace's `.duragent/`, then `$DURAGENT_HOME/resources/`."""
        workspace = Path(self.get_session(session_id).workspace)
        found = load_resources(workspace, self.settings.resources_dir)
        return sorted(resource.name for resource in found if resource.kind == kind)

    def _require_resource(self, session_id: str, kind: ResourceKind, name: str) -> None:
        """Refuse a name that does not exist before a run starts: a started run would
        only fail, and stay in the session's history as a failed run of no turns."""
        session = self.get_session(session_id)
        if not Path(session.workspace).is_dir():
            return  # a workspace on the workers' machines only: the run reports it
        known = self.resources(session_id, kind)
        if name not in known:
            raise ResourceNotFound(session_id, kind, name, known)

    async def _start(
        self,
        session_id: str,
        messages: list[AgentMessage],
        invocation: Invocation | None,
        max_turns: int | None = None,
        options: RunOptions | None = None,
    ) -> RunHandle:
        """prompt, skill and promptFromTemplate share this one flow (seed 004)."""
        if max_turns is not None and max_turns < 1:
            raise InvalidPrompt(f"max_turns must be at least 1 (got {max_turns})")
        run_id = uuid.uuid4().hex
        kind: RunKind = invocation.kind if invocation else "prompt"
        run_input = RunInput(
            session_id=session_id,
            run_id=run_id,
            prompt=messages,
            kind=kind,
            invocation=invocation,
            max_turns=max_turns,
            options=options or self.default_options(),
        )
        summary = f"{kind}: " + (invocation.name if invocation else _first_line(messages))
        try:
            return await self._start_workflow(run_input, summary)
        except WorkflowAlreadyStartedError as err:
            # A run whose outcome is stored may still be closing: wait for it, once.
            if await self._settled_open_run(session_id) is not None:
                raise await self._busy(session_id) from err
        try:
            return await self._start_workflow(run_input, summary)
        except WorkflowAlreadyStartedError as err:
            raise await self._busy(session_id) from err

    async def _start_workflow(self, run_input: RunInput, summary: str) -> RunHandle:
        """Start the session's run workflow; `WorkflowAlreadyStartedError` if one is open."""
        session_id, run_id = run_input.session_id, run_input.run_id
        handle = await self._start_session_workflow(
            SessionRun.run, run_input, session_id, "run", run_id=run_id, summary=summary
        )
        return RunHandle(session_id, run_id, handle)

    async def _start_session_workflow(
        self,
        run: Any,
        data: Any,
        session_id: str,
        kind: str,
        *,
        run_id: str | None = None,
        summary: str | None = None,
    ) -> Any:
        """Start a workflow under the session's workflow id, searchable by session and
        kind; `WorkflowAlreadyStartedError` while another one is open."""
        attributes = [
            SearchAttributePair(SESSION_ID_ATTR, session_id),
            SearchAttributePair(KIND_ATTR, kind),
        ]
        memo = {"kind": kind}
        if run_id is not None:
            attributes.append(SearchAttributePair(RUN_ID_ATTR, run_id))
            memo["run_id"] = run_id
        return await self.temporal.start_workflow(
            run,
            data,
            id=session_workflow_id(session_id),
            task_queue=self.settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            search_attributes=TypedSearchAttributes(attributes),
            memo=memo,
            static_summary=summary,
        )

    def default_options(self) -> RunOptions:
        timeout = self.settings.heartbeat_timeout_s
        return RunOptions(model_heartbeat_timeout_s=timeout, tool_heartbeat_timeout_s=timeout)

    async def wait(self, session_id: str, run_id: str | None = None) -> RunResult:
        """Wait for the session's open run (or the given one) and return its result."""
        handle = self.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        result = await handle.result(follow_runs=True)
        if run_id is not None and result.run_id != run_id:
            record = self.run_state(run_id)
            if record is None:
                raise LookupError(f"run {run_id!r} does not exist")
            return RunResult(
                session_id=session_id,
                run_id=run_id,
                status=record.status,
                turns=record.turns,
                usage=record.usage,
                error=record.error,
            )
        return result

    async def _open_run(self, session_id: str) -> WorkflowHandle[SessionRun, RunResult] | None:
        """The session's open run, or None when it is idle (or doing something else)."""
        self.get_session(session_id)
        handle = self.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        running = described.status == WorkflowExecutionStatus.RUNNING
        return handle if running and described.workflow_type == "SessionRun" else None

    async def _settled_open_run(
        self, session_id: str
    ) -> WorkflowHandle[SessionRun, RunResult] | None:
        """Like `_open_run`, but a run the store already shows as ended counts as closed:
        its workflow is in its last step, and input sent now must start the next run."""
        handle = await self._open_run(session_id)
        if handle is None:
            return None
        run_id = await self._run_id(handle)
        with self.db.transaction() as db:
            record = runs.get_run(db, run_id) if run_id else None
        if record is None or record.status == "running":
            return handle
        with contextlib.suppress(Exception):  # its outcome is already in the store
            await asyncio.wait_for(handle.result(), timeout=_CLOSING_WAIT_S)
        return await self._open_run(session_id)

    async def phase(self, session_id: str) -> Phase:
        """The session's phase: `idle` unless a run or a structural operation is open."""
        return (await self.status(session_id)).phase

    async def status(self, session_id: str) -> SessionStatus:
        """Phase, latest config, queued messages and pending writes of a session.

        A run is asked directly (a query); when no worker answers in time (all are down),
        the phase comes from the stored run state and the queues are unknown (`run` None).
        """
        session = self.get_session(session_id)
        with self.db.transaction() as db:
            waiting = input_queue.list_items(db, session_id, kind="next_turn")
            config_path = entries.load_config_path(db, session.leaf_id)
            running = runs.running_runs(db, session_id)
        state = derive_path_state(config_path, session.config)
        config = session.config.model_copy(update=state.model_dump())
        open_type = await self._open_workflow_type(session_id)
        if open_type in STRUCTURAL_PHASES:
            return SessionStatus(STRUCTURAL_PHASES[open_type], config, None, waiting)
        if open_type != "SessionRun":
            return SessionStatus(phase="idle", config=config, run=None, next_turn=waiting)
        handle = self.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        try:
            # The RPC timeout alone is not a bound: a server-side deadline error is retried.
            view: RunView = await asyncio.wait_for(
                handle.query(SessionRun.state, rpc_timeout=QUERY_TIMEOUT),
                timeout=QUERY_TIMEOUT.total_seconds(),
            )
        except (RPCError, TimeoutError):
            phase: Phase = running[0].phase if running else "turn"
            return SessionStatus(phase=phase, config=config, run=None, next_turn=waiting)
        return SessionStatus(view.phase, view.config or config, view, waiting)

    async def _open_workflow_type(self, session_id: str) -> str | None:
        """The type of the workflow open under the session's id, if any."""
        handle = self.temporal.get_workflow_handle(session_workflow_id(session_id))
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return (
            described.workflow_type if described.status == WorkflowExecutionStatus.RUNNING else None
        )

    # The session tree (seed 000 / 004): compaction, navigation, forks, labels ---------

    async def compact(
        self,
        session_id: str,
        *,
        instructions: str | None = None,
        settings: CompactionSettings | None = None,
    ) -> CompactResult:
        """Compact an idle session now (`SessionBusy` while a run is open)."""
        if instructions is not None:
            bounded("compaction instructions", instructions)
        data = CompactInput(
            session_id=session_id,
            op_id=uuid.uuid4().hex,
            instructions=instructions,
            settings=settings or CompactionSettings(),
        )
        handle = await self._structural(session_id, SessionCompaction.run, data, "compaction")
        result: CompactResult = await handle.result()
        return result

    async def navigate(
        self,
        session_id: str,
        entry_id: str,
        *,
        summarize: bool = False,
        instructions: str | None = None,
    ) -> NavigateResult:
        """Move the session's leaf to `entry_id` (a user message: to its parent, and its
        text comes back for editing), optionally summarising the branch left behind."""
        if instructions is not None:
            bounded("summary instructions", instructions)
        with self.db.transaction() as db:
            if not entries.belongs_to(db, entry_id, session_id):
                self.get_session(session_id)
                raise EntryNotInSession(session_id, entry_id)
        data = NavigateInput(
            session_id=session_id,
            op_id=uuid.uuid4().hex,
            target_entry_id=entry_id,
            summarize=summarize,
            instructions=instructions,
        )
        handle = await self._structural(session_id, SessionNavigation.run, data, "navigation")
        result: NavigateResult = await handle.result()
        return result

    async def _structural(self, session_id: str, run: Any, data: Any, kind: str) -> Any:
        """Start a structural operation under the session's id: refused while busy."""
        self.get_session(session_id)
        try:
            return await self._start_session_workflow(run, data, session_id, kind)
        except WorkflowAlreadyStartedError as err:
            raise await self._busy(session_id) from err

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

    def labels(self, session_id: str) -> dict[str, str]:
        """Each labelled entry's current label (the latest label entry for it wins)."""
        found: dict[str, str] = {}
        for entry in self.entries(session_id):
            if isinstance(entry, LabelEntry):
                if entry.label:
                    found[entry.target_id] = entry.label
                else:
                    found.pop(entry.target_id, None)
        return found

    # Steering a run ------------------------------------------------------------------

    async def steer(
        self, session_id: str, message: PromptInput, *, item_id: str | None = None
    ) -> str:
        """Queue a message for the open run: it reaches the model after the current turn's
        tool calls have all finished. Returns the item id (resend with it: delivered once)."""
        return await self._queue(session_id, message, item_id, SessionRun.steer, "steer")

    async def follow_up(
        self, session_id: str, message: PromptInput, *, item_id: str | None = None
    ) -> str:
        """Queue a message for when the open run's agent would otherwise stop."""
        return await self._queue(session_id, message, item_id, SessionRun.follow_up, "follow up")

    async def _queue(
        self,
        session_id: str,
        message: PromptInput,
        item_id: str | None,
        signal: Any,
        what: str,
    ) -> str:
        message_what = "steering message" if what == "steer" else f"{what} message"
        item = QueuedMessage(
            id=item_id or uuid.uuid4().hex, message=self._one_message(message, message_what)
        )
        handle = await self._open_run(session_id)
        if handle is None:
            raise SessionIdle(session_id, what)
        try:
            await handle.signal(signal, item)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise SessionIdle(session_id, what) from err
            raise
        return item.id

    def next_turn(self, session_id: str, message: PromptInput) -> QueueItem:
        """Queue a message for the session's next run, inserted before its prompt (seed
        004's nextTurn). Stored, so it waits through restarts; allowed while busy."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return input_queue.add_item(
                db,
                item_id=uuid.uuid4().hex,
                session_id=session_id,
                kind="next_turn",
                message=self._one_message(message, "queued input"),
            )

    def next_turn_items(self, session_id: str) -> list[QueueItem]:
        """next_turn messages still waiting for a run."""
        self.get_session(session_id)
        with self.db.transaction() as db:
            return input_queue.list_items(db, session_id, kind="next_turn")

    # The input queue and runtime guidance (seed 001) -------------------------------------

    async def send_input(
        self,
        session_id: str,
        text: str,
        *,
        guidance: bool = False,
        intent: GuidanceIntent | None = None,
    ) -> RunHandle | QueueItem:
        """What a chat box does: an idle session starts a run; a busy one queues the input
        (as guidance for the run, if asked, with `intent` or else the one its wording
        suggests) and never cancels or starts a run."""
        if intent is not None and not guidance:
            raise InvalidPrompt("an intent is for guidance: send it with guidance")
        if not guidance:
            with contextlib.suppress(SessionBusy):
                return await self.prompt(session_id, text)
        if guidance:
            return await self.guide_text(session_id, text, intent=intent)
        return self.next_turn(session_id, text)

    async def guide_text(
        self, session_id: str, text: str, *, intent: GuidanceIntent | None = None
    ) -> QueueItem:
        """New text as guidance for the run in progress (queued, then guided). When the
        run cannot take it (`SessionIdle`: none is open), nothing is kept: it was meant for
        this run, not the next one."""
        if await self._open_run(session_id) is None:
            raise SessionIdle(session_id, "take guidance")  # nothing stored, not even cancelled
        item = self.next_turn(session_id, text)
        try:
            return await self.guide(session_id, item.id, intent=intent)
        except DuragentError:
            with contextlib.suppress(DuragentError):
                self.delete_queue_item(session_id, item.id)
            raise

    def queue_items(self, session_id: str, *, status: str | None = "pending") -> list[QueueItem]:
        self.get_session(session_id)
        with self.db.transaction() as db:
            return input_queue.list_items(db, session_id, status=status)

    def queue_item(self, session_id: str, item_id: str) -> QueueItem:
        with self.db.transaction() as db:
            item = input_queue.get_item(db, item_id)
        if item is None or item.session_id != session_id:
            raise QueueItemNotFound(session_id, item_id)
        return item

    async def guide(
        self, session_id: str, item_id: str, *, intent: GuidanceIntent | None = None
    ) -> QueueItem:
        """Turn a pending item into guidance for the session's run in progress; the run
        takes it at its nearest safe point. Guiding the same item twice delivers it once."""
        item = self.queue_item(session_id, item_id)
        bounded("guidance", item.text)  # items queued before the limit held may be larger
        handle = await self._open_run(session_id)
        run_id = await self._run_id(handle) if handle else None
        if handle is None or run_id is None:
            raise SessionIdle(session_id, "take guidance")
        if not (item.kind == "guidance" and item.run_id == run_id and item.status == "pending"):
            with self.db.transaction() as db:
                if not input_queue.guide(db, item_id, run_id):
                    raise QueueItemNotPending(item_id, self.queue_item(session_id, item_id).status)
        guidance = GuidanceItem(id=item.id, text=item.text, intent=intent or classify(item.text))
        try:
            await handle.signal(SessionRun.guidance, guidance)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            with self.db.transaction() as db:  # the run ended meanwhile: keep the input
                input_queue.release_guidance(db, run_id)
            raise SessionIdle(session_id, "take guidance") from err
        return self.queue_item(session_id, item_id)

    def edit_queue_item(self, session_id: str, item_id: str) -> str:
        """Take an item back to edit it: it is cancelled and its text returned."""
        self._cancel_item(session_id, item_id)
        return self.queue_item(session_id, item_id).text

    def delete_queue_item(self, session_id: str, item_id: str) -> None:
        self._cancel_item(session_id, item_id)

    def _cancel_item(self, session_id: str, item_id: str) -> None:
        item = self.queue_item(session_id, item_id)
        with self.db.transaction() as db:
            if not input_queue.cancel(db, item_id):
                raise QueueItemNotPending(item_id, item.status)

    async def _run_id(self, handle: WorkflowHandle[SessionRun, RunResult]) -> str | None:
        """The run id an open run was started with (its memo, kept across continue-as-new);
        read from Temporal, so it is known while no worker runs."""
        memo = await (await handle.describe()).memo()
        run_id = memo.get("run_id")
        return run_id if isinstance(run_id, str) else None

    async def abort(self, session_id: str) -> RunResult:
        """Abort (stop) the open run: running tools are killed, finished results kept,
        queued steering and follow-ups dropped and returned in the result, and the
        session's pending input-queue items cancelled."""
        handle = await self._open_run(session_id)
        if handle is None:
            raise SessionIdle(session_id, "abort")
        await handle.cancel()
        return await handle.result()

    # Config setters and session writes (seed 004's allowed-during-turn operations) ---

    async def change(self, session_id: str, change: SessionChange) -> None:
        """Apply a change: pending in the open run until its next save point, or applied
        at once (by a short workflow under the session's id) when the session is idle."""
        bounded("session change", change)
        self.get_session(session_id)
        handle = await self.temporal.start_workflow(
            SessionChanges.run,
            session_id,
            id=session_workflow_id(session_id),
            task_queue=self.settings.task_queue,
            start_signal="change",
            start_signal_args=[change],
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(SESSION_ID_ATTR, session_id),
                    SearchAttributePair(KIND_ATTR, "changes"),
                ]
            ),
        )
        # Idle session: wait until the change is stored, so a read or a prompt right
        # after sees it. (A busy session's run holds it as a pending write instead.)
        described = await handle.describe()
        if described.workflow_type == "SessionChanges":
            await handle.result()

    async def configure(self, session_id: str, **fields: Any) -> None:
        """Set config: model, thinking_level, active_tools, system_prompt, max_tokens,
        steering_mode, follow_up_mode. Getters see it at once; turns from the next one."""
        for field, value in fields.items():
            if value is not None:
                bounded(field.replace("_", " "), value)
        try:
            config = ConfigChange(**fields)
        except ValidationError as err:
            raise InvalidChange(_one_line(err)) from err
        if config.active_tools is not None:
            try:
                check_tool_names(config.active_tools, self.tool_names)
            except ValueError as err:
                raise InvalidChange(f"active_tools: {err}") from err
        await self.change(session_id, self._change(config=config))

    async def set_model(self, session_id: str, model: str) -> None:
        await self.configure(session_id, model=model)

    async def set_thinking_level(self, session_id: str, level: ThinkingLevel) -> None:
        await self.configure(session_id, thinking_level=level)

    async def set_active_tools(self, session_id: str, tools: Sequence[str]) -> None:
        await self.configure(session_id, active_tools=list(tools))

    async def set_system_prompt(self, session_id: str, prompt: str) -> None:
        await self.configure(session_id, system_prompt=prompt)

    async def set_queue_modes(
        self,
        session_id: str,
        *,
        steering: QueueMode | None = None,
        follow_up: QueueMode | None = None,
    ) -> None:
        await self.configure(session_id, steering_mode=steering, follow_up_mode=follow_up)

    async def append_custom_entry(
        self, session_id: str, custom_type: str, data: dict[str, Any] | None = None
    ) -> str:
        """Store extension state in the session (never sent to the model)."""
        bounded("custom entry", {"custom_type": custom_type, "data": data or {}})
        entry = CustomEntry(
            id=uuid.uuid4().hex,
            parent_id=None,
            timestamp=now_ms(),
            custom_type=custom_type,
            data=data or {},
        )
        await self.change(session_id, self._change(entries=[entry]))
        return entry.id

    async def append_custom_message(
        self, session_id: str, custom_type: str, text: str, *, display: bool = True
    ) -> str:
        """A message of an extension's that the model sees (and the UI, if `display`)."""
        bounded("custom message type", custom_type)
        bounded("custom message", text)
        entry = CustomMessageEntry(
            id=uuid.uuid4().hex,
            parent_id=None,
            timestamp=now_ms(),
            custom_type=custom_type,
            content=[TextContent(text=text)],
            display=display,
        )
        await self.change(session_id, self._change(entries=[entry]))
        return entry.id

    async def set_label(self, session_id: str, entry_id: str, label: str | None) -> None:
        if label is not None:
            bounded("label", label)
        entry = LabelEntry(
            id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), target_id=entry_id, label=label
        )
        await self.change(session_id, self._change(entries=[entry]))

    async def set_name(self, session_id: str, name: str) -> None:
        bounded("session name", name)
        entry = SessionInfoEntry(id=uuid.uuid4().hex, parent_id=None, timestamp=now_ms(), name=name)
        await self.change(session_id, self._change(entries=[entry]))

    async def pending_writes(self, session_id: str) -> list[SessionEntry]:
        """Writes waiting for the open run's next save point (not in session reads yet)."""
        status = await self.status(session_id)
        return status.run.pending_writes if status.run else []

    @staticmethod
    def _change(
        *, config: ConfigChange | None = None, entries: list[FacadeEntry] | None = None
    ) -> SessionChange:
        return SessionChange(
            id=uuid.uuid4().hex, config=config, entries=entries or [], timestamp=now_ms()
        )

    @staticmethod
    def _one_message(message: PromptInput, what: str) -> AgentMessage:
        try:
            messages = normalize_prompt_input(message, now_ms())
        except ValueError as err:
            raise InvalidPrompt(str(err)) from err
        if len(messages) != 1:
            raise InvalidPrompt(f"expected one message, got {len(messages)}")
        bounded(what, message if isinstance(message, str) else messages[0])
        return messages[0]

    async def events(
        self,
        session_id: str,
        *,
        after: int = 0,
        run_id: str | None = None,
        follow: bool = True,
    ) -> AsyncIterator[StoredEvent]:
        """Run events after the cursor `after`, in order.

        Without `follow`, every event stored so far. With `follow`, keep waiting for new
        ones until `agent_end` of `run_id` (or of any run, when no run id is given) has
        been yielded.
        """
        self.get_session(session_id)
        cursor = after
        while True:
            with self.db.transaction() as db:
                batch = events.read_events(db, session_id, after=cursor)
            for event in batch:
                cursor = event.seq
                if run_id is None or event.run_id == run_id:
                    yield event
                    if follow and event.type == "agent_end":
                        return
            if not batch:
                if not follow:
                    return
                await asyncio.sleep(EVENT_POLL_S)

    async def _busy(self, session_id: str) -> SessionBusy:
        workflow_id = session_workflow_id(session_id)
        run_id: str | None = None
        kind = "run"
        try:
            described = await self.temporal.get_workflow_handle(workflow_id).describe()
            memo = await described.memo()
            run_id = str(memo.get("run_id")) if memo.get("run_id") else None
            kind = str(memo.get("kind") or kind)
        except RPCError:
            pass
        return SessionBusy(session_id, run_id, workflow_id, kind)

    # What a web page shows beside the conversation -------------------------------------

    def session_summaries(
        self, *, owner: str | None = None, limit: int = 100
    ) -> list[tuple[SessionRecord, RunRecord | None]]:
        """Sessions, most recently active first, each with its latest run (None before
        its first): a session list's status without asking Temporal about each one."""
        with self.db.transaction() as db:
            listed = sessions.list_sessions(db, owner=owner, limit=limit)
            return [(s, next(iter(runs.list_runs(db, s.id, limit=1)), None)) for s in listed]

    async def worker_answering(self, session_id: str) -> bool | None:
        """Whether a worker answers for the session's open run (None when no run is open).
        A run that no worker answers makes no progress until a worker is back."""
        if await self._open_workflow_type(session_id) != "SessionRun":
            return None
        handle = self.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        try:
            await asyncio.wait_for(
                handle.query(SessionRun.state, rpc_timeout=QUERY_TIMEOUT),
                timeout=QUERY_TIMEOUT.total_seconds(),
            )
        except (RPCError, TimeoutError):
            return False
        return True

    def require_entry(self, session_id: str, entry_id: str) -> None:
        """`EntryNotInSession` unless `entry_id` is an entry of the session."""
        with self.db.transaction() as db:
            found = entries.belongs_to(db, entry_id, session_id)
        if not found:
            self.get_session(session_id)
            raise EntryNotInSession(session_id, entry_id)


def bounded(what: str, value: object) -> None:
    """The one size check on what a client sends (`MAX_INPUT_BYTES`, measured by
    `input_bytes`: a text as sent, a message as its JSON): `InputTooLarge` naming `what`
    before anything of it is stored or sent."""
    size = input_bytes(value)
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(what, size, MAX_INPUT_BYTES)


def _one_line(error: ValidationError) -> str:
    """A validation error as one line per bad field: which field, the rule, the value."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']} (got {e['input']!r})"
        for e in error.errors(include_url=False)
    )


def _first_line(messages: Sequence[AgentMessage]) -> str:
    for message in messages:
        if isinstance(message, UserMessage):
            return text_of(message.content).splitlines()[0][:80] if text_of(message.content) else ""
    return ""
