"""The session's workflow under its one id: starting one, finding the open one, asking it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import (
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.workflow import UpdateMethodMultiParam

from duragent.client.errors import DuragentError, SessionBusy, SessionIdle, failure_text
from duragent.client.part import ClientPart
from duragent.client.temporal_setup import search_attributes_required
from duragent.domain.runs import RunResult, RunView, session_workflow_id
from duragent.domain.search_attributes import session_attributes
from duragent.workflows.session_run import SessionRun

# A run whose outcome is stored has one workflow step left; it is waited for this long.
_CLOSING_WAIT_S = 10.0
QUERY_TIMEOUT = timedelta(seconds=3)
"""A query needs a worker; when none answers this soon, the store is asked instead."""


ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")


class SessionWorkflows(ClientPart):
    """The session's workflow as the other parts start and ask it (`client.workflows`):
    one workflow id per session, so one run or operation at a time."""

    async def start(
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
        memo = {"kind": kind}
        if run_id is not None:
            memo["run_id"] = run_id
        with search_attributes_required(self._client.settings.temporal_namespace):
            return await self._client.temporal.start_workflow(
                run,
                data,
                id=session_workflow_id(session_id),
                task_queue=self._client.settings.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                search_attributes=session_attributes(session_id, kind, run_id),
                memo=memo,
                static_summary=summary,
            )

    async def open_run(self, session_id: str) -> WorkflowHandle[SessionRun, RunResult] | None:
        """The session's open run, or None when it is idle (or doing something else)."""
        await self._client.sessions.get(session_id)
        if await self.open_type(session_id) != "SessionRun":
            return None
        return self._client.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )

    async def settled_open_run(
        self, session_id: str
    ) -> WorkflowHandle[SessionRun, RunResult] | None:
        """Like `open_run`, but a run the store already shows as ended counts as closed:
        its workflow is in its last step, and input sent now must start the next run."""
        handle = await self.open_run(session_id)
        if handle is None:
            return None
        run_id = await self.run_id(handle)
        record = await self._client.runs.get(run_id) if run_id else None
        if record is None or record.status == "running":
            return handle
        with contextlib.suppress(Exception):  # its outcome is already in the store
            await asyncio.wait_for(handle.result(), timeout=_CLOSING_WAIT_S)
        return await self.open_run(session_id)

    async def wait_closed(self, session_id: str, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until the workflow open under the session's id, if
        any, has closed, however it ends."""
        handle = self._client.temporal.get_workflow_handle(session_workflow_id(session_id))
        with contextlib.suppress(Exception):  # how it ended is not this wait's business
            await asyncio.wait_for(handle.result(follow_runs=False), timeout=timeout_s)

    async def open_type(self, session_id: str) -> str | None:
        """The type of the workflow open under the session's id, if any."""
        handle = self._client.temporal.get_workflow_handle(session_workflow_id(session_id))
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return (
            described.workflow_type if described.status == WorkflowExecutionStatus.RUNNING else None
        )

    async def run_id(self, handle: WorkflowHandle[SessionRun, RunResult]) -> str | None:
        """The run id an open run was started with (its memo, kept across continue-as-new);
        read from Temporal, so it is known while no worker runs."""
        memo = await (await handle.describe()).memo()
        run_id = memo.get("run_id")
        return run_id if isinstance(run_id, str) else None

    async def busy(self, session_id: str) -> SessionBusy:
        workflow_id = session_workflow_id(session_id)
        run_id: str | None = None
        kind = "run"
        try:
            described = await self._client.temporal.get_workflow_handle(workflow_id).describe()
            memo = await described.memo()
            run_id = str(memo.get("run_id")) if memo.get("run_id") else None
            kind = str(memo.get("kind") or kind)
        except RPCError:
            pass
        return SessionBusy(session_id, run_id, workflow_id, kind)

    async def query_state(self, session_id: str) -> RunView | None:
        """The open run's view, asked of its worker; None when no run is open.
        `WorkerNotAnswering`-style silence (no worker answers in time) raises `RPCError` or
        `TimeoutError`."""
        if await self.open_type(session_id) != "SessionRun":
            return None
        handle = self._client.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        # The RPC timeout alone is not a bound: a server-side deadline error is retried.
        view: RunView = await asyncio.wait_for(
            handle.query(SessionRun.state, rpc_timeout=QUERY_TIMEOUT),
            timeout=QUERY_TIMEOUT.total_seconds(),
        )
        return view

    async def update_open_run(
        self,
        session_id: str,
        update: UpdateMethodMultiParam[[SessionRun, ArgT], ResultT],
        arg: ArgT,
        *,
        what: str,
        timeout: timedelta,
        refused: Callable[[str], DuragentError],
        not_taken: Callable[[str], DuragentError],
        settled: Callable[[], str | None] | None = None,
    ) -> ResultT:
        """Send a person's word (a decision, an answer, a raise) to the session's open run
        as `update`, acknowledged once the run took it. `SessionIdle` (naming `what`) when
        no run is open, the store shows it ended, or it ended meanwhile; `refused(why)`
        when the run refuses it, or when no run is open and `settled()` (read from the
        store) says why the word comes too late: a second answer to a question whose first
        answer let the run finish is refused as the run would have refused it.
        `not_taken(detail)` when no worker answers, or none took it within `timeout`:
        nothing was recorded then, and it may be sent again."""
        handle = await self.settled_open_run(session_id)
        if handle is None:
            raise await self._idle(session_id, what, refused, settled)
        answering = await self._client.sessions.worker_answering(session_id)
        if not answering:
            # None: the run closed since it was found (its last step was under way).
            if answering is None or await self.open_run(session_id) is None:
                raise await self._idle(session_id, what, refused, settled)
            raise not_taken("no worker answers")
        try:
            # The RPC timeout alone is not a bound: a server-side deadline error is retried.
            return await asyncio.wait_for(
                handle.execute_update(update, arg, rpc_timeout=timeout),
                timeout=timeout.total_seconds(),
            )
        except WorkflowUpdateFailedError as err:
            raise refused(failure_text(err)) from err
        except (RPCError, TimeoutError) as err:
            if await self.open_run(session_id) is None:
                raise await self._idle(session_id, what, refused, settled) from err
            raise not_taken(f"no worker took it within {timeout.total_seconds():g} s") from err

    @staticmethod
    async def _idle(
        session_id: str,
        what: str,
        refused: Callable[[str], DuragentError],
        settled: Callable[[], str | None] | None,
    ) -> DuragentError:
        """The error for a word that found no run open: `refused` when the store says why
        it comes too late, `SessionIdle` otherwise."""
        why = await asyncio.to_thread(settled) if settled is not None else None
        return SessionIdle(session_id, what) if why is None else refused(why)
