"""Runs (`client.runs`): start one (prompt, skill, template), wait for it, abort it, read
the stored ones."""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from temporalio.client import WorkflowContinuedAsNewError, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError

from duragent.client.bounds import bounded, first_line
from duragent.client.budgets import check_priced, checked_budget
from duragent.client.errors import InputTooLarge, InvalidPrompt, ResourceNotFound, SessionIdle
from duragent.client.part import StoreBackedPart, SyncPart, in_thread
from duragent.domain.agents import MAX_DEPS_BYTES
from duragent.domain.budgets import Budget
from duragent.domain.input import PromptInput, input_bytes, normalize_prompt_input
from duragent.domain.messages import AgentMessage, UserMessage
from duragent.domain.resources import ResourceKind
from duragent.domain.runs import (
    Invocation,
    RunInput,
    RunKind,
    RunOptions,
    RunResult,
    session_workflow_id,
)
from duragent.store import entries, runs, sessions
from duragent.store.clock import now_ms
from duragent.store.records import RunRecord
from duragent.workflows.session_run import SessionRun


@dataclass(frozen=True)
class RunHandle:
    session_id: str
    run_id: str
    workflow: WorkflowHandle[SessionRun, RunResult]
    runs: Runs = field(repr=False, compare=False)

    async def result(self) -> RunResult:
        """The run's result once it has ended (not that of the next run, which input sent
        meanwhile may start right after it)."""
        return await self.runs.result_of(self.workflow, self.session_id, self.run_id)


class SyncRuns(SyncPart):
    """Stored runs (`client.sync.runs`): read them, and what a run's end stored."""

    def _require_resource(self, session_id: str, kind: ResourceKind, name: str) -> None:
        """Refuse a name that does not exist before a run starts: a started run would
        only fail, and stay in the session's history as a failed run of no turns."""
        session = self._client.sync.sessions.get(session_id)
        if not Path(session.workspace).is_dir():
            return  # a workspace on the workers' machines only: the run reports it
        known = self._client.sync.sessions.resources(session_id, kind)
        if name not in known:
            raise ResourceNotFound(session_id, kind, name, known)

    def _ended(self, session_id: str, run_id: str) -> RunResult | None:
        """The result of a run whose end is stored, as the store has it; None otherwise."""
        with self._client.db.transaction() as db:
            record = runs.get_run(db, run_id)
            if record is None or record.status == "running":
                return None
            final_text = entries.final_text(db, session_id, run_id)
        cost = self._client.sync.sessions.costs(session_id).of_run(run_id)
        return self._with_output(
            RunResult(
                session_id=session_id,
                run_id=run_id,
                status=record.status,
                turns=record.turns,
                usage=record.usage,
                error=record.error,
                final_text=final_text,
                cost_usd=cost.cost_usd or 0.0,
                unpriced_models=cost.unpriced_models,
            )
        )

    def _with_output(self, result: RunResult) -> RunResult:
        """`result` with the run's structured output, when its session's agent has one."""
        if result.status != "completed" or result.output is not None:
            return result
        with self._client.db.transaction() as db:
            session = sessions.get_session(db, result.session_id)
            if session is None or session.config.output is None:
                return result
            output = entries.run_output(db, result.session_id, result.run_id)
        return result.model_copy(update={"output": output})

    def get(self, run_id: str) -> RunRecord | None:
        """The stored run (its status, turns, usage, error); None for an unknown id."""
        with self._client.db.transaction() as db:
            return runs.get_run(db, run_id)

    def list(self, session_id: str) -> builtins.list[RunRecord]:
        """The session's runs, newest first."""
        self._client.sync.sessions.get(session_id)
        with self._client.db.transaction() as db:
            return runs.list_runs(db, session_id)


class Runs(StoreBackedPart[SyncRuns]):
    """Start, wait for and abort a session's runs; read the stored ones."""

    get = in_thread(SyncRuns.get)
    list = in_thread(SyncRuns.list)

    async def prompt(
        self,
        session_id: str,
        prompt: PromptInput,
        *,
        max_turns: int | None = None,
        options: RunOptions | None = None,
        budget: Budget | dict[str, Any] | None = None,
        run_id: str | None = None,
        deps: JsonValue = None,
    ) -> RunHandle:
        """Start a run of the session with this prompt; `SessionBusy` if one is open.
        `budget` limits what the run may spend (domain.budgets), besides the session's.
        `run_id` (default: a new one) names the run: a caller that may ask twice (a
        retried activity) knows its run by it. `deps`: the run's dependencies in JSON
        form (each tool call's `ToolContext.deps`; `duragent.Agent.run` makes them)."""
        await self._client.sessions.get(session_id)
        try:
            messages = normalize_prompt_input(prompt, now_ms())
        except ValueError as err:
            raise InvalidPrompt(str(err)) from err
        bounded("prompt", prompt if isinstance(prompt, str) else messages)
        if deps is not None and (size := input_bytes(deps)) > MAX_DEPS_BYTES:
            raise InputTooLarge("deps", size, MAX_DEPS_BYTES)
        return await self._start(
            session_id, messages, None, max_turns, options, budget, run_id=run_id, deps=deps
        )

    async def skill(
        self, session_id: str, name: str, args: Sequence[str] = (), **kwargs: Any
    ) -> RunHandle:
        """Run the skill `name` (a markdown file in the session's skills) with `args`;
        `ResourceNotFound` (listing the skills there are) before any run starts."""
        return await self._invoke(
            session_id, Invocation(kind="skill", name=name, args=list(args)), **kwargs
        )

    async def prompt_from_template(
        self, session_id: str, name: str, args: Sequence[str] = (), **kwargs: Any
    ) -> RunHandle:
        """Run the prompt template `name` with positional `args` ($1, $2, $@);
        `ResourceNotFound` (listing the templates there are) before any run starts."""
        return await self._invoke(
            session_id, Invocation(kind="template", name=name, args=list(args)), **kwargs
        )

    async def _invoke(self, session_id: str, invocation: Invocation, **kwargs: Any) -> RunHandle:
        """Start a run of a skill or template, once its name is known to exist."""
        bounded(f"{invocation.kind} invocation", invocation)
        await asyncio.to_thread(
            self._store._require_resource, session_id, invocation.kind, invocation.name
        )
        return await self._start(session_id, [], invocation, **kwargs)

    async def _start(
        self,
        session_id: str,
        messages: builtins.list[AgentMessage],
        invocation: Invocation | None,
        max_turns: int | None = None,
        options: RunOptions | None = None,
        budget: Budget | dict[str, Any] | None = None,
        *,
        run_id: str | None = None,
        deps: JsonValue = None,
    ) -> RunHandle:
        """prompt, skill and promptFromTemplate share this one flow."""
        if max_turns is not None and max_turns < 1:
            raise InvalidPrompt(f"max_turns must be at least 1 (got {max_turns})")
        checked = None if budget is None else checked_budget(budget)
        if checked is not None and checked.max_cost_usd is not None:
            config, _, _ = await self._client.sessions.stored_status(session_id)
            check_priced(checked, config.model, self._client.prices)
        run_id = run_id or uuid.uuid4().hex
        kind: RunKind = invocation.kind if invocation else "prompt"
        run_input = RunInput(
            session_id=session_id,
            run_id=run_id,
            prompt=messages,
            kind=kind,
            invocation=invocation,
            max_turns=max_turns,
            options=options or self.default_options(),
            budget=checked if checked is not None and checked.limited else None,
            deps=deps,
        )
        summary = f"{kind}: " + (invocation.name if invocation else first_line(messages))
        if any(isinstance(m, UserMessage) and m.scheduled for m in messages):
            summary = "scheduled " + summary
        try:
            return await self._start_workflow(run_input, summary)
        except WorkflowAlreadyStartedError as err:
            # A run whose outcome is stored may still be closing: wait for it, once.
            if await self._client.workflows.settled_open_run(session_id) is not None:
                raise await self._client.workflows.busy(session_id) from err
        try:
            return await self._start_workflow(run_input, summary)
        except WorkflowAlreadyStartedError as err:
            raise await self._client.workflows.busy(session_id) from err

    def handle(self, session_id: str, run_id: str) -> RunHandle:
        """A handle of a run that was started already (its `result` waits for its end)."""
        workflow = self._client.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        return RunHandle(session_id, run_id, workflow, self)

    async def _start_workflow(self, run_input: RunInput, summary: str) -> RunHandle:
        """Start the session's run workflow; `WorkflowAlreadyStartedError` if one is open."""
        session_id, run_id = run_input.session_id, run_input.run_id
        handle = await self._client.workflows.start(
            SessionRun.run, run_input, session_id, "run", run_id=run_id, summary=summary
        )
        return RunHandle(session_id, run_id, handle, self)

    def default_options(self) -> RunOptions:
        settings = self._client.settings
        timeout = settings.heartbeat_timeout_s
        return RunOptions(
            model_heartbeat_timeout_s=timeout,
            tool_heartbeat_timeout_s=timeout,
            host_wait_s=settings.host_wait_s,
            ask_user_timeout_s=settings.ask_user_timeout_s,
        )

    async def wait(self, session_id: str, run_id: str | None = None) -> RunResult:
        """Wait for the session's open run (or the given one) and return its result."""
        handle = self._client.temporal.get_workflow_handle_for(
            SessionRun.run, session_workflow_id(session_id)
        )
        run_id = run_id or await self._client.workflows.run_id(handle)
        if run_id is None:  # no run was ever started under the session's id
            raise LookupError(f"session {session_id!r} has no run")
        return await self.result_of(handle, session_id, run_id)

    async def result_of(
        self, handle: WorkflowHandle[SessionRun, RunResult], session_id: str, run_id: str
    ) -> RunResult:
        """The result of the run `run_id`, once it has ended, following the workflow's
        executions from `handle`'s: one that continued as new continued the same run
        (a long one), or started the next run for input that waited; then this run's
        end is in the store, and its result is read from there."""
        execution = handle
        while True:
            try:
                result = await execution.result(follow_runs=False)
            except WorkflowContinuedAsNewError as err:
                stored = await asyncio.to_thread(self._store._ended, session_id, run_id)
                if stored is not None:
                    return stored
                execution = self._client.temporal.get_workflow_handle_for(
                    SessionRun.run, handle.id, run_id=err.new_execution_run_id
                )
                continue
            if result.run_id == run_id:
                return await asyncio.to_thread(self._store._with_output, result)
            stored = await asyncio.to_thread(self._store._ended, session_id, run_id)
            if stored is None:
                raise LookupError(f"run {run_id!r} does not exist")
            return stored

    async def abort(self, session_id: str) -> RunResult:
        """Abort (stop) the open run: running tools are killed, finished results kept,
        queued steering and follow-ups dropped and returned in the result, and the
        session's pending input-queue items cancelled."""
        handle = await self._client.workflows.open_run(session_id)
        if handle is None:
            raise SessionIdle(session_id, "abort")
        run_id = await self._client.workflows.run_id(handle)
        await handle.cancel()
        if run_id is None:
            return await handle.result()
        return await self.result_of(handle, session_id, run_id)
