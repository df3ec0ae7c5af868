"""The Python client: create sessions, prompt them, wait, follow their events."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

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

from client.connection import connect_temporal, open_store
from client.errors import InvalidPrompt, SessionBusy, SessionNotFound
from domain.config import SessionConfig
from domain.entries import SessionEntry
from domain.input import PromptInput, normalize_prompt_input
from domain.messages import AgentMessage, UserMessage, text_of
from domain.runs import Phase, RunInput, RunKind, RunOptions, RunResult, session_workflow_id
from settings import Settings
from store import display, entries, events, runs, sessions
from store.clock import now_ms
from store.db import Database
from store.errors import SessionNotFound as StoreSessionNotFound
from store.records import DisplayMessage, RunRecord, SessionRecord, StoredEvent
from workflows.session_run import SessionRun

SESSION_ID_ATTR = SearchAttributeKey.for_keyword("DuragentSessionId")
RUN_ID_ATTR = SearchAttributeKey.for_keyword("DuragentRunId")
KIND_ATTR = SearchAttributeKey.for_keyword("DuragentKind")

MAX_PROMPT_BYTES = 256 * 1024
"""Prompts enter workflow history once; Temporal warns above 256 KB per payload."""

EVENT_POLL_S = 0.05


@dataclass(frozen=True)
class RunHandle:
    session_id: str
    run_id: str
    workflow: WorkflowHandle[SessionRun, RunResult]

    async def result(self) -> RunResult:
        return await self.workflow.result()


class DuragentClient:
    def __init__(self, temporal: Client, db: Database, settings: Settings) -> None:
        self.temporal = temporal
        self.db = db
        self.settings = settings

    @classmethod
    async def connect(cls, settings: Settings) -> DuragentClient:
        return cls(await connect_temporal(settings), open_store(settings), settings)

    # Sessions -------------------------------------------------------------------------

    def create_session(
        self,
        *,
        workspace: Path | str | None = None,
        name: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        owner: str | None = None,
    ) -> SessionRecord:
        session_id = uuid.uuid4().hex
        config = SessionConfig(model=model or self.settings.model)
        if system_prompt is not None:
            config = config.model_copy(update={"system_prompt": system_prompt})
        folder = Path(workspace) if workspace else self.settings.workspaces / session_id
        folder = folder.expanduser().resolve()
        folder.mkdir(parents=True, exist_ok=True)
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

    def run_state(self, run_id: str) -> RunRecord | None:
        with self.db.transaction() as db:
            return runs.get_run(db, run_id)

    # Runs -----------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        prompt: PromptInput,
        *,
        kind: RunKind = "prompt",
        max_turns: int | None = None,
        options: RunOptions | None = None,
    ) -> RunHandle:
        """Start a run of the session with this prompt; `SessionBusy` if one is open."""
        self.get_session(session_id)
        try:
            messages = normalize_prompt_input(prompt, now_ms())
        except ValueError as err:
            raise InvalidPrompt(str(err)) from err
        size = len(json.dumps([m.model_dump(mode="json") for m in messages]).encode())
        if size > MAX_PROMPT_BYTES:
            raise InvalidPrompt(
                f"prompt is {size} bytes; the limit is {MAX_PROMPT_BYTES} bytes "
                "(put large content in a workspace file and refer to it)"
            )
        run_id = uuid.uuid4().hex
        run_input = RunInput(
            session_id=session_id,
            run_id=run_id,
            prompt=messages,
            kind=kind,
            max_turns=max_turns,
            options=options or self.default_options(),
        )
        workflow_id = session_workflow_id(session_id)
        try:
            handle = await self.temporal.start_workflow(
                SessionRun.run,
                run_input,
                id=workflow_id,
                task_queue=self.settings.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(SESSION_ID_ATTR, session_id),
                        SearchAttributePair(RUN_ID_ATTR, run_id),
                        SearchAttributePair(KIND_ATTR, "run"),
                    ]
                ),
                memo={"run_id": run_id, "kind": "run"},
                static_summary=f"{kind}: {_first_line(messages)}",
            )
        except WorkflowAlreadyStartedError as err:
            raise await self._busy(session_id) from err
        return RunHandle(session_id, run_id, handle)

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

    async def phase(self, session_id: str) -> Phase:
        """The session's phase: `idle` unless a run is open."""
        self.get_session(session_id)
        handle = self.temporal.get_workflow_handle(session_workflow_id(session_id))
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return "idle"
            raise
        if described.status != WorkflowExecutionStatus.RUNNING:
            return "idle"
        phase: Phase = await handle.query(SessionRun.phase)
        return phase

    async def events(
        self,
        session_id: str,
        *,
        after: int = 0,
        run_id: str | None = None,
        follow: bool = True,
    ) -> AsyncIterator[StoredEvent]:
        """Run events after the cursor `after`, in order.

        With `follow`, keep waiting for new ones until `agent_end` of `run_id` (or of
        any run, when no run id is given) has been yielded.
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
            if not follow:
                return
            if not batch:
                await asyncio.sleep(EVENT_POLL_S)

    async def _busy(self, session_id: str) -> SessionBusy:
        workflow_id = session_workflow_id(session_id)
        run_id: str | None = None
        try:
            described = await self.temporal.get_workflow_handle(workflow_id).describe()
            memo = await described.memo()
            run_id = str(memo.get("run_id")) if memo.get("run_id") else None
        except RPCError:
            pass
        return SessionBusy(session_id, run_id, workflow_id)


def _first_line(messages: Sequence[AgentMessage]) -> str:
    for message in messages:
        if isinstance(message, UserMessage):
            return text_of(message.content).splitlines()[0][:80] if text_of(message.content) else ""
    return ""
