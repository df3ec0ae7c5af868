"""The session's workflow under its one id: starting one, finding the open one, asking it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.service import RPCError, RPCStatusCode

from duragent.client.errors import SessionBusy
from duragent.client.session_reads import SessionReads
from duragent.domain.config import SessionConfig
from duragent.domain.context import derive_path_state
from duragent.domain.runs import Phase, RunResult, RunView, session_workflow_id
from duragent.store import entries, input_queue, runs
from duragent.store.records import QueueItem, RunRecord
from duragent.workflows.session_run import SessionRun

SESSION_ID_ATTR = SearchAttributeKey.for_keyword("DuragentSessionId")
RUN_ID_ATTR = SearchAttributeKey.for_keyword("DuragentRunId")
KIND_ATTR = SearchAttributeKey.for_keyword("DuragentKind")

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
    host: str | None = None
    """The session's host (`domain.hosts`); None until its first run, or shared."""

    @property
    def awaiting_host(self) -> str | None:
        """The host the run waits for (phase `awaiting_host`), else None."""
        if self.phase != "awaiting_host":
            return None
        return (self.run.awaiting_host if self.run else None) or self.host


class SessionWorkflows(SessionReads):
    """What the client asks Temporal about a session's workflow."""

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

    async def _open_run(self, session_id: str) -> WorkflowHandle[SessionRun, RunResult] | None:
        """The session's open run, or None when it is idle (or doing something else)."""
        await asyncio.to_thread(self.get_session, session_id)
        if await self._open_workflow_type(session_id) != "SessionRun":
            return None
        return self.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )

    async def _settled_open_run(
        self, session_id: str
    ) -> WorkflowHandle[SessionRun, RunResult] | None:
        """Like `_open_run`, but a run the store already shows as ended counts as closed:
        its workflow is in its last step, and input sent now must start the next run."""
        handle = await self._open_run(session_id)
        if handle is None:
            return None
        run_id = await self._run_id(handle)
        record = await asyncio.to_thread(self.run_state, run_id) if run_id else None
        if record is None or record.status == "running":
            return handle
        with contextlib.suppress(Exception):  # its outcome is already in the store
            await asyncio.wait_for(handle.result(), timeout=_CLOSING_WAIT_S)
        return await self._open_run(session_id)

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

    async def _run_id(self, handle: WorkflowHandle[SessionRun, RunResult]) -> str | None:
        """The run id an open run was started with (its memo, kept across continue-as-new);
        read from Temporal, so it is known while no worker runs."""
        memo = await (await handle.describe()).memo()
        run_id = memo.get("run_id")
        return run_id if isinstance(run_id, str) else None

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

    async def phase(self, session_id: str) -> Phase:
        """The session's phase: `idle` unless a run or a structural operation is open."""
        return (await self.status(session_id)).phase

    async def status(self, session_id: str) -> SessionStatus:
        """Phase, latest config, queued messages and pending writes of a session, and its
        host (with the host a run waits for, in phase `awaiting_host`).

        A run is asked directly (a query); when no worker answers in time (all are down),
        the phase comes from the stored run state and the queues are unknown (`run` None).
        """
        found = await self._status(session_id)
        host = (await asyncio.to_thread(self.get_session, session_id)).host
        return dataclasses.replace(found, host=host)

    async def _status(self, session_id: str) -> SessionStatus:
        config, waiting, running = await asyncio.to_thread(self._stored_status, session_id)
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

    def _stored_status(
        self, session_id: str
    ) -> tuple[SessionConfig, list[QueueItem], list[RunRecord]]:
        """What the store says of a session's status: its latest config (the session's,
        with what its current path set), next-turn input, and runs marked running."""
        session = self.get_session(session_id)
        with self.db.transaction() as db:
            waiting = input_queue.list_items(db, session_id, kind="next_turn")
            config_path = entries.load_config_path(db, session.leaf_id)
            running = runs.running_runs(db, session_id)
        state = derive_path_state(config_path, session.config)
        # dict(state), not model_dump(): nested models (the approval policy) stay models.
        return session.config.model_copy(update=dict(state)), waiting, running

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
